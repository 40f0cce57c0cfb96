"""Who can run code on a cluster ``start_cluster`` started (N3).

Ray binds its GCS, raylet and workers on every interface (it rewrites a loopback node
address to the host's), so the guard is Ray's token authentication, which ``start_cluster``
turns on whatever ``RAY_AUTH_MODE`` the environment carries. The owner, the intruders and
the friend are processes of their own, each with a home of its own (no token of the
machine's user is read or written).
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from nodes import ray_env

OWNER = """
import sys, agent_channel_ray as acr, ray
acr.start_cluster(num_cpus=1)
print(ray.get_runtime_context().gcs_address, flush=True)
sys.stdin.read()  # until the test is done
ray.shutdown()
"""

RUN_CODE = """
import sys, ray
ray.init(address=sys.argv[1], log_to_driver=False)
@ray.remote(num_cpus=0)
def intrude():
    return "ran"
print(ray.get(intrude.remote(), timeout=60))
"""


@contextmanager
def _owned_cluster(**env: str) -> Iterator[tuple[str, Path]]:
    """A cluster started by ``start_cluster`` in a process of its own: its GCS address
    (the host's address, not the loopback's) and the owner's home."""
    with tempfile.TemporaryDirectory(prefix="ray-n3-", dir="/tmp") as tmp:
        home = Path(tmp) / "owner"
        home.mkdir()
        owner = subprocess.Popen(
            [sys.executable, "-c", OWNER],
            env=ray_env(tmp, HOME=str(home), **env),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            assert owner.stdout is not None
            address = owner.stdout.readline().strip()
            assert address, "the owner's cluster did not start"
            yield address, home
        finally:
            assert owner.stdin is not None
            owner.stdin.close()
            try:
                owner.wait(120)
            except subprocess.TimeoutExpired:
                owner.kill()


def _runs_code(address: str, **env: str) -> bool:
    """Whether a process with ``env`` (a home of its own) runs a task on ``address``. A
    refusal must be Ray's token check, not a timeout: the intruder tries the GCS twice, one
    second apart (Ray's default tries for twenty seconds, idle), and the friend, with the
    same budget, gets through."""
    with tempfile.TemporaryDirectory(prefix="ray-n3x-", dir="/tmp") as tmp:
        environ = {k: v for k, v in ray_env(tmp).items() if not k.startswith("RAY_AUTH")}
        run = subprocess.run(
            [sys.executable, "-c", RUN_CODE, address],
            env={**environ, "HOME": tmp, "RAY_gcs_server_port_wait_time_s": "2", **env},
            capture_output=True,
            text=True,
            timeout=150,
        )
        if run.returncode == 0 and run.stdout.strip().endswith("ran"):
            return True
        assert "InvalidAuthToken" in run.stderr, run.stderr[-2000:]
        return False


def test_n3_without_the_token_no_process_runs_code_even_if_the_env_said_disabled() -> None:
    """``RAY_AUTH_MODE=disabled`` inherited by the driver no longer opens the cluster: before,
    ``start_cluster`` left Ray's mode to the environment, and a process with no token ran a
    task on the cluster through the host's address."""
    with _owned_cluster(RAY_AUTH_MODE="disabled") as (address, home):
        assert not address.startswith("127.")  # reachable beyond the loopback: hence the token
        assert not _runs_code(address)  # no token, auth off on its side
        token = home / ".ray" / "auth_token"
        assert stat.S_IMODE(token.stat().st_mode) == 0o600  # the owner's alone
        assert not _runs_code(address, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN="0" * 32)
        friend = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token)}
        assert _runs_code(address, **friend)  # the token is all it takes


def test_n3_the_default_environment_gets_a_token_too() -> None:
    with _owned_cluster() as (address, home):
        assert (home / ".ray" / "auth_token").exists()
        assert not _runs_code(address)
        assert os.environ.get("RAY_AUTH_MODE") in (None, "token")  # the test's own untouched
