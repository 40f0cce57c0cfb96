"""docs/examples/fleet.py, run as its docstring says against a ``ray start`` cluster: launch
three executions and exit, list and post from a later run, end them from a third."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from nodes import ray_env, ray_head, wait_for

EXAMPLE = Path(__file__).parents[3] / "docs" / "examples" / "fleet.py"


def _run(verb: str, folder: str, env: dict[str, str]) -> list[str]:
    run = subprocess.run(
        [sys.executable, "fleet.py", verb],
        env=env,
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return [line for line in run.stdout.splitlines() if line.strip()]


def test_the_fleet_example_runs_as_documented() -> None:
    with tempfile.TemporaryDirectory(prefix="ray-ex-", dir="/tmp") as tmp:
        shutil.copy(EXAMPLE, tmp)
        env = ray_env(tmp, RAY_AUTH_MODE="token")
        with ray_head("--num-cpus=1", temp_dir=os.path.join(tmp, "ray"), env=env):
            wait_for((Path(tmp) / "ray" / "ray_current_cluster").exists, "the address file")
            launched = _run("launch", tmp, env)  # connect(): the cluster `ray start` began
            assert len(launched) == 3 and all(line.startswith("launched ") for line in launched)
            status = _run("status", tmp, env)
            assert len(status) == 3
            assert all("ready', 'still there?']" in line for line in status), status
            ended = _run("end", tmp, env)
            assert len(ended) == 3
            assert _run("status", tmp, env) == []
