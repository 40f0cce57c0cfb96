"""Run pytest while busy loops hold every core: the suite must stay green under load.

    uv run python scripts/under_load.py [--runs N] [--loops N] [PYTEST ARGS ...]

Starts ``--loops`` processes (default: one per core) that spin until the runs end, then
runs ``pytest PYTEST ARGS`` ``--runs`` times in a row (default 3), printing one line per
run and the failing tests of each (a failed run's whole output is kept in a file it names).
Exit 1 if any run failed. With no pytest arguments it runs the core's, the consumer's and
``tests/acp/stream``'s suites.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUITES = ["packages/channel-core/tests", "packages/react-consumer/tests", "tests/acp/stream"]


def spin() -> None:
    while True:
        pass


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--loops", type=int, default=os.cpu_count() or 2)
    args, pytest_args = parser.parse_known_args(argv)
    loops = [multiprocessing.Process(target=spin, daemon=True) for _ in range(args.loops)]
    for loop in loops:
        loop.start()
    failed = 0
    try:
        for run in range(1, args.runs + 1):
            start = time.monotonic()
            proc = subprocess.run(
                [sys.executable, "-m", "pytest", "-q", *(pytest_args or SUITES)],
                cwd=ROOT,
                capture_output=True,
                text=True,
            )
            lines = proc.stdout.splitlines()
            summary = lines[-1] if lines else proc.stderr.strip()[-200:]
            took = time.monotonic() - start
            print(f"run {run}: {summary} ({took:.0f} s, {args.loops} busy loops)")
            for line in lines:
                if line.startswith(("FAILED", "ERROR")):
                    print(f"  {line}")
            if proc.returncode != 0:  # the whole output, for the diagnosis
                kept = Path(tempfile.gettempdir()) / f"under_load-run{run}-{os.getpid()}.log"
                kept.write_text(proc.stdout + proc.stderr, encoding="utf-8")
                print(f"  output: {kept}")
            failed += proc.returncode != 0
    finally:
        for loop in loops:
            loop.kill()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
