"""What a shell verb costs from a person's (or a supervising agent's) point of view; JSON out.

    uv run python benchmarks/verb_startup.py [--rounds N]

Each figure is a fresh interpreter, run round-robin so a busy machine slows them alike,
reported as the median of ``--rounds``:

- ``empty``: ``python -c pass``, the floor;
- ``ls``: ``agent-channel-acp ls`` with no server running (finds the discovery directory,
  prints one line), which is every verb's start-up;
- ``import acp``: what the verbs would pay on top if they imported the ACP SDK (they
  speak their few methods through ``agent_channel_acp.wire._rpc`` instead).

Ratios: ``ls / empty`` and ``(empty + import acp) / ls``, the second one being how much
slower every verb would start with the SDK. Not run in CI.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

CASES = {
    "empty": [sys.executable, "-c", "pass"],
    "ls": [sys.executable, "-m", "agent_channel_acp", "ls"],
    "import acp": [sys.executable, "-c", "import acp"],
}


def main(rounds: int) -> dict[str, object]:
    env = dict(os.environ, AGENT_CHANNEL_RUNTIME_DIR=tempfile.mkdtemp(prefix="verb-rt-"))
    times: dict[str, list[float]] = {name: [] for name in CASES}
    for _ in range(rounds):
        for name, argv in CASES.items():
            t = time.perf_counter()
            subprocess.run(argv, env=env, capture_output=True, check=True)
            times[name].append(time.perf_counter() - t)
    ms = {name: round(statistics.median(v) * 1000, 1) for name, v in times.items()}
    with_sdk = ms["ls"] + ms["import acp"] - ms["empty"]
    return {
        "rounds": rounds,
        "median_ms": ms,
        "ratios": {
            "ls / empty": round(ms["ls"] / ms["empty"], 2),
            "ls with the SDK imported / ls": round(with_sdk / ms["ls"], 2),
        },
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=11)
    print(json.dumps(main(parser.parse_args().rounds), indent=2))
