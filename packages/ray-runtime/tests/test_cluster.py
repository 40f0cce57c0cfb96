"""``start_cluster`` starts a cluster of its own, whatever else the machine has (N2)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from nodes import ray_env, ray_head, wait_for

START = """
import agent_channel_ray as acr, ray
acr.start_cluster(num_cpus=1)
print(ray.get_runtime_context().gcs_address)
ray.shutdown()
"""

JOIN = """
import agent_channel_ray as acr, ray
acr.connect()
print(ray.get_runtime_context().gcs_address)
ray.shutdown()
"""


def _run(code: str, env: dict[str, str]) -> str:
    run = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=180
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout.strip().splitlines()[-1]


def test_n2_start_cluster_ignores_a_stale_address_file_and_ray_address() -> None:
    """A ``ray start`` cluster (or the address file one left behind, or ``RAY_ADDRESS``) is
    never joined: before, ``ray.init(num_cpus=...)`` tried to connect to it and raised
    ``ValueError`` ("When connecting to an existing cluster, num_cpus ... must not be
    provided")."""
    # Ray's unix sockets live under its temp dir: a short path, not pytest's tmp_path.
    with tempfile.TemporaryDirectory(prefix="ray-n2-", dir="/tmp") as tmp:
        (Path(tmp) / "ray").mkdir()
        (Path(tmp) / "ray" / "ray_current_cluster").write_text("127.0.0.1:9\n")
        address = _run(START, ray_env(tmp, RAY_ADDRESS="127.0.0.1:9"))
        assert address and not address.endswith(":9")  # its own, not the stale one


def test_n2_start_cluster_starts_its_own_beside_a_running_ray_start_cluster() -> None:
    """With a ``ray start --head`` cluster running (its address file where a driver looks),
    ``start_cluster`` starts another, leaves the running one's address file as it was, and
    only ``connect()`` joins the running one."""
    with tempfile.TemporaryDirectory(prefix="ray-n2-", dir="/tmp") as tmp:
        env = ray_env(tmp)
        with ray_head("--num-cpus=1", temp_dir=os.path.join(tmp, "ray"), env=env) as foreign:
            address_file = Path(tmp) / "ray" / "ray_current_cluster"
            wait_for(address_file.exists)  # written once the head is up
            theirs = address_file.read_text().strip()
            assert _port(theirs) == _port(foreign.address)
            ours = _run(START, env)
            assert _port(ours) != _port(theirs)
            assert address_file.read_text().strip() == theirs
            assert _run(JOIN, env) == theirs  # joining is asked for by name


def _port(address: str) -> str:
    return address.rpartition(":")[2]


def test_n2_start_cluster_leaves_no_address_file_behind() -> None:
    with tempfile.TemporaryDirectory(prefix="ray-n2-", dir="/tmp") as tmp:
        _run(START, ray_env(tmp))
        assert not (Path(tmp) / "ray" / "ray_current_cluster").exists()


HEALTH = """
import base64, json, os, sys
import agent_channel_ray as acr, ray
acr.start_cluster(num_cpus=1, **json.loads(sys.argv[1]))
for pid in filter(str.isdigit, os.listdir("/proc")):  # its GCS (the health checks' owner)
    try:  # is a child of this process
        args = open(f"/proc/{pid}/cmdline", "rb").read().decode().split("\\0")
        status = open(f"/proc/{pid}/status").read()
    except OSError:
        continue
    if args[0].endswith("gcs_server") and f"\\nPPid:\\t{os.getpid()}\\n" in status:
        given = next(a for a in args if a.startswith("--config_list="))
        print(base64.b64decode(given.partition("=")[2]).decode())
ray.shutdown()
"""


def _gcs_config(options: dict[str, object]) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="ray-n5-", dir="/tmp") as tmp:
        run = subprocess.run(
            [sys.executable, "-c", HEALTH, json.dumps(options)],
            env=ray_env(tmp),
            capture_output=True,
            text=True,
            timeout=180,
        )
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_n5_start_cluster_checks_its_nodes_every_second_unless_told_otherwise() -> None:
    """The cluster's GCS is started with a health check of a second, dead after 3 misses
    (a node that dies is marked so in ~3 s, not Ray's ~15 s); a ``_system_config`` key the
    caller gives wins, the others stay."""
    config = _gcs_config({})
    assert config["health_check_period_ms"] == 1000
    assert config["health_check_timeout_ms"] == 1000
    assert config["health_check_failure_threshold"] == 3
    mine = _gcs_config({"_system_config": {"health_check_failure_threshold": 5}})
    assert mine["health_check_failure_threshold"] == 5
    assert mine["health_check_period_ms"] == 1000
