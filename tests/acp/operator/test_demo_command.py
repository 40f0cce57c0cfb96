"""The README's demo command works and tells the story it promises."""

from __future__ import annotations

import ctypes
import json
import os
import platform
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


def test_demo_command_stops_mid_tool_then_follows_the_redirect() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "agent_channel_acp", "demo", "--json", "--tool-seconds", "0.5"],
        capture_output=True,
        text=True,
        timeout=60,  # a hang guard, not a timing assertion
    )
    assert run.returncode == 0, run.stderr
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    assert lines[-1]["stop_reasons"] == ["cancelled", "end_turn", "end_turn", "end_turn"]
    statuses = [line.get("status") or line.get("stop_reason") for line in lines]
    statuses = [s for s in statuses if s]
    # the stopped tool is reported failed before its prompt answers "cancelled"
    assert statuses[:2] == ["failed", "cancelled"]
    said = "".join(line["text"] for line in lines if line["who"] == "agent")
    assert "did not finish: search (cancelled" in said  # the model saw the repaired call


def _interrupted_in_the_long_tool(
    interrupt: Callable[[subprocess.Popen[str]], None],
) -> tuple[int, str, str]:
    """Run the demo until the redirect's (long) tool call runs, ``interrupt`` it, and
    return its exit status, stdout and stderr. The demo gets a process group of its own,
    so the test can play the terminal."""
    demo = subprocess.Popen(
        [sys.executable, "-m", "agent_channel_acp", "demo", "--json", "--tool-seconds", "600"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        # Ctrl-C live, as in a terminal, even where the suite was started ignoring SIGINT
        # (a background job of a script): the demo would rightly go on ignoring it.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    guard = threading.Timer(60, lambda: os.killpg(demo.pid, signal.SIGKILL))  # hang guard only
    guard.start()
    try:
        assert demo.stdout is not None
        started = 0
        for line in demo.stdout:
            event = json.loads(line)
            started += event["who"] == "tool" and event["text"].startswith("▶")
            if started == 2:
                break
        interrupt(demo)
        out, err = demo.communicate()
    finally:
        guard.cancel()
    return demo.returncode, out, err


def test_ctrl_c_during_the_demo_exits_130_quietly() -> None:
    # Ctrl-C in a terminal signals the whole foreground process group: the demo and the
    # agent it launched.
    code, out, err = _interrupted_in_the_long_tool(lambda d: os.killpg(d.pid, signal.SIGINT))
    assert code == 130, err
    assert err.strip() == "", err
    assert "Traceback" not in out


def _group(leader: int) -> list[int]:
    """The processes of ``leader``'s group (the demo and the agent it started)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[2]) == leader:  # field 5: the group
                found.append(int(entry))
    return found


_TGKILL = {"x86_64": 234, "aarch64": 131}.get(platform.machine())
"""The tgkill(2) system call's number: a signal to one thread of another process."""


def _tgkill(pid: int, tid: int, sig: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(_TGKILL, pid, tid, sig) != 0:
        raise OSError(ctypes.get_errno(), f"tgkill({pid}, {tid}) failed")


def _waits_in_the_loop(pid: int) -> bool:
    """The main thread sleeps in the event loop's epoll_wait (the kernel says where)."""
    return "epoll" in Path(f"/proc/{pid}/wchan").read_text()


def _aim_at_a_worker(pid: int, sig: int) -> bool:
    """``sig`` to a worker thread of ``pid`` if one lives, else to its main thread; whether a
    worker took it. A thread may end between the listing and the signal: the next is tried."""
    for tid in (int(t) for t in os.listdir(f"/proc/{pid}/task") if int(t) != pid):
        try:
            _tgkill(pid, tid, sig)
        except ProcessLookupError:
            continue
        return True
    _tgkill(pid, pid, sig)
    return False


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or _TGKILL is None, reason="Linux's tgkill(2) aims it"
)
def test_ctrl_c_that_reaches_a_worker_thread_still_exits_130() -> None:
    # The kernel hands a process's SIGINT to any one of its threads: here each process of
    # the group that has a worker thread gets it there (the agent's log writer; the demo's
    # child watcher, which asyncio starts before Python 3.12 only), where it cannot wake the
    # main thread's select() in which Python runs its handler. A process with no worker
    # thread can only take it in its main thread.
    def aim_at_workers(demo: subprocess.Popen[str]) -> None:
        members = _group(demo.pid)
        assert len(members) == 2, members
        while not all(_waits_in_the_loop(pid) for pid in members):  # both asleep in select()
            time.sleep(0.01)
        # A terminal's Ctrl-C reaches every process of the group at once. Sent one by one, the
        # first could act (the demo stops its agent, whose threads end) before the second is
        # sent: the group is stopped while each gets its own, and goes on with both pending.
        os.killpg(demo.pid, signal.SIGSTOP)
        try:
            aimed = [_aim_at_a_worker(pid, signal.SIGINT) for pid in members]
        finally:
            os.killpg(demo.pid, signal.SIGCONT)
        assert any(aimed), "no process of the demo has a worker thread: nothing to aim at"

    code, _, err = _interrupted_in_the_long_tool(aim_at_workers)
    assert code == 130, err
    assert err.strip() == "", err


def test_an_agent_started_ignoring_sigint_keeps_ignoring_it() -> None:
    # A background job of a non-interactive shell starts with SIGINT ignored; Ctrl-C in
    # that terminal must not reach it, so the loop's handler is only added over Python's own.
    agent = subprocess.Popen(
        [sys.executable, "-m", "agent_channel_acp", "stdio", "--demo"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    stdin, stdout = agent.stdin, agent.stdout
    assert stdin is not None and stdout is not None

    def ask(msg_id: int) -> Any:
        params = {"protocolVersion": 1, "clientCapabilities": {}}
        frame = {"jsonrpc": "2.0", "id": msg_id, "method": "initialize", "params": params}
        stdin.write(json.dumps(frame) + "\n")
        stdin.flush()
        line = stdout.readline()
        assert line, "the agent ended"
        return json.loads(line)["id"]

    guard = threading.Timer(60, agent.kill)  # hang guard only
    guard.start()
    try:
        assert ask(1) == 1  # serving: its loop runs
        agent.send_signal(signal.SIGINT)
        assert ask(2) == 2  # asked after the signal, answered: still serving
        _, err = agent.communicate()  # EOF on stdin ends it
    finally:
        guard.cancel()
    assert agent.returncode == 0, err
