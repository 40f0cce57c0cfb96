"""``start_cluster`` starts a cluster of its own, whatever else the machine has (N2)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

START = """
import agent_channel_ray as acr, ray
acr.start_cluster(num_cpus=1)
print(ray.get_runtime_context().gcs_address)
ray.shutdown()
"""


def test_n2_start_cluster_ignores_a_stale_address_file_and_ray_address() -> None:
    """A ``ray start`` cluster (or the address file one left behind, or ``RAY_ADDRESS``) is
    never joined: before, ``ray.init(num_cpus=...)`` tried to connect to it and raised
    ``ValueError`` ("When connecting to an existing cluster, num_cpus ... must not be
    provided")."""
    # Ray's unix sockets live under its temp dir: a short path, not pytest's tmp_path.
    with tempfile.TemporaryDirectory(prefix="ray-n2-", dir="/tmp") as tmp:
        (Path(tmp) / "ray").mkdir()
        (Path(tmp) / "ray" / "ray_current_cluster").write_text("127.0.0.1:9\n")
        env = {**os.environ, "RAY_TMPDIR": tmp, "RAY_ADDRESS": "127.0.0.1:9"}
        run = subprocess.run(
            [sys.executable, "-c", START], env=env, capture_output=True, text=True, timeout=120
        )
        assert run.returncode == 0, run.stderr[-2000:]
        address = run.stdout.strip().splitlines()[-1]
        assert address and not address.endswith(":9")  # its own, not the stale one
