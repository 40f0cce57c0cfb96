"""``ray start`` nodes a test starts and stops itself: its own temp dir, its own process group.

``ray stop`` stops every Ray process of the machine (another suite's cluster too), so a node
is started with ``--block`` in a session of its own and stopped by killing that process
group: the head's GCS and raylet, and the workers the raylet forked.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

DEADLINE = 90.0
MARK = "AGENT_CHANNEL_TEST_NODE"
"""Set in a node's environment (so its workers'): how :meth:`Node.stop` finds them all."""
RAY = str(Path(sys.executable).with_name("ray"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Node:
    """One ``ray start --block`` process group."""

    process: subprocess.Popen[bytes]
    temp_dir: str
    address: str = ""
    log: Path = field(default_factory=Path)

    def stop(self) -> None:
        """Kill the node's whole process group (its raylet, its workers, a head's GCS)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(DEADLINE)
        _kill_leftovers(self.temp_dir)

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""


def ray_env(temp_dir: str, **extra: str) -> dict[str, str]:
    """An environment whose Ray temp dir (and so its address file) is ``temp_dir``'s."""
    return {
        **os.environ,
        "RAY_TMPDIR": temp_dir,
        "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0",
        "RAY_USAGE_STATS_ENABLED": "0",
        MARK: temp_dir,
        **extra,
    }


@contextlib.contextmanager
def ray_node(
    *args: str, temp_dir: str | None = None, env: dict[str, str] | None = None
) -> Iterator[Node]:
    """``ray start --block ARGS`` with a temp dir of its own (made here unless given),
    stopped (its process group killed) on the way out."""
    own = temp_dir is None
    temp = temp_dir or tempfile.mkdtemp(prefix="rn-", dir="/tmp")  # unix sockets: short
    Path(temp).mkdir(parents=True, exist_ok=True)
    log = Path(temp) / f"start-{time.monotonic_ns()}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [RAY, "start", "--block", "--disable-usage-stats", f"--temp-dir={temp}", *args],
            env={**(env or ray_env(temp)), MARK: temp},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    node = Node(process, temp, log=log)
    try:
        yield node
    finally:
        node.stop()
        if own:
            shutil.rmtree(temp, ignore_errors=True)


@contextlib.contextmanager
def ray_head(
    *args: str, temp_dir: str | None = None, env: dict[str, str] | None = None
) -> Iterator[Node]:
    """A head node on the loopback at a free port; ``node.address`` once its GCS answers."""
    port = free_port()
    with ray_node(
        "--head",
        f"--port={port}",
        "--node-ip-address=127.0.0.1",
        "--include-dashboard=false",
        *args,
        temp_dir=temp_dir,
        env=env,
    ) as node:
        node.address = f"127.0.0.1:{port}"
        wait_listening(node, port)
        yield node


def wait_listening(node: Node, port: int) -> None:
    """Poll until ``port`` accepts on the loopback (a deadline, not a sleep)."""
    end = time.monotonic() + DEADLINE
    while time.monotonic() < end:
        if node.process.poll() is not None:
            raise AssertionError(f"ray start exited: {node.output()}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            return
        time.sleep(0.1)
    raise AssertionError(f"ray start never listened on {port}: {node.output()}")


def wait_for(condition: Callable[[], object], what: str = "the condition") -> None:
    """Poll ``condition`` until true (a deadline on an observable state, not a sleep)."""
    end = time.monotonic() + DEADLINE
    while not condition():
        if time.monotonic() > end:
            raise AssertionError(f"{what} never held")
        time.sleep(0.1)


def _kill_leftovers(temp_dir: str) -> None:
    """The node's processes outside its group: a worker is a session of its own, found by
    the mark in its environment."""
    mine = os.getpid()
    mark = f"{MARK}={temp_dir}\0".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == mine:
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if mark in environ + b"\0":
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(entry.name), signal.SIGKILL)
