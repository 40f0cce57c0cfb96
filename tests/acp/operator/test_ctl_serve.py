"""``agent-channel-acp serve``: where it says it listens, its discovery record (A1), the demo,
and a clean end on SIGTERM or Ctrl-C (executions ended, record and socket removed)."""

from __future__ import annotations

import os
import signal
import stat
from pathlib import Path

import pytest
from serving import ctl, execution, messages, serving, wait_for

AGENT = ("--agent", "agents:react_agent")


@pytest.fixture
def rt(tmp_path: Path) -> Path:
    return tmp_path / "rt"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a1_serve_publishes_a_record_and_removes_it_and_its_socket_when_stopped(
    rt: Path, sig: int
) -> None:
    with serving(rt, *AGENT, "--count", "2") as served:
        record_path = Path(served.announced["record"])
        assert record_path == rt / f"{served.proc.pid}.json"
        assert stat.S_IMODE(os.stat(record_path).st_mode) == 0o600
        sock = Path(served.announced["listen"]["path"])
        assert stat.S_IMODE(os.lstat(sock).st_mode) == 0o600
        ids = served.ids(2)
        wait_for(
            lambda: sorted(e["id"] for e in served.record["executions"]) == sorted(ids),
            "the record lists the executions",
        )
        assert {e["status"] for e in served.record["executions"]} <= {
            "running",
            "waiting for operator",
        }
        assert served.stop(sig) == 0
        assert not os.path.lexists(record_path) and not os.path.lexists(sock)


def test_serve_announces_one_readable_line(rt: Path) -> None:
    import subprocess
    import sys

    from conftest import GUARD, HERE
    from serving import env, first_line

    proc = subprocess.Popen(
        [sys.executable, "-m", "agent_channel_acp", "serve", *AGENT],
        env=env(rt),
        stdout=subprocess.PIPE,
        text=True,
        cwd=HERE,
    )
    try:
        line = first_line(proc)
        assert line.startswith("agent-channel-acp: serving 1 execution on ")
        assert f"{rt}/{proc.pid}.sock (pid {proc.pid})" in line
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(GUARD) == 0
        if proc.stdout is not None:
            proc.stdout.close()


def test_serve_demo_works_its_task_then_waits_for_the_operator(rt: Path) -> None:
    with serving(rt, "--demo", "--count", "3", AGENT_CHANNEL_DEMO_TOOL_SECONDS="0.02") as served:
        ids = served.ids(3)
        wait_for(lambda: execution(rt, ids[0])["status"] == "waiting for operator", "the task done")
        said = [m["text"] for m in messages(rt, ids[0], every=True)]
        assert any(t.startswith("Briefing:") for t in said)
        assert ctl(rt, "send", ids[0], "thanks").returncode == 0


def test_serve_refuses_in_one_line(rt: Path, tmp_path: Path) -> None:
    taken = tmp_path / "taken"
    taken.write_text("x")
    run = ctl(rt, "serve", *AGENT, "--socket", str(taken))
    assert run.returncode == 1
    assert run.stderr.strip().splitlines() == [
        f"agent-channel-acp: serve: {taken} exists and is not a socket: refusing to replace it"
    ]
    run = ctl(rt, "serve")
    assert run.returncode == 2 and "--agent MODULE:FACTORY or --demo" in run.stderr
    run = ctl(rt, "serve", "--agent", "agents:no_such_factory")
    assert run.returncode == 1 and "Traceback" not in run.stderr
