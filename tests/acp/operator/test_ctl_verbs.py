"""The shell verbs (A26, with A19, A22-A25 on the wire): ``agent-channel-acp ls | messages |
send | cancel | cancel-tool | queue | end`` run as subprocesses against ``serve`` (also a
subprocess), found through the discovery record. The suite's react agent works ``--input``
on its own: ``block ...`` makes it call a tool that blocks until cancelled. Each test that
takes ``agent_host`` runs twice: the agent inside ``serve``, and on a Ray cluster that
``serve --ray`` serves (``hosts``).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp.client.connection import ClientSideConnection
from conftest import GUARD, HERE, Recorder
from hosts import Host
from serving import (
    ctl,
    ctl_json,
    execution,
    messages,
    one_line_failure,
    serving,
    wait_for,
)

AGENT = "agents:react_agent"


@pytest.fixture
def rt(tmp_path: Path) -> Path:
    return tmp_path / "rt"


def tool_call_ids(rt: Path, target: str) -> list[str]:
    """Ids of the tool calls the agent has made so far (raw messages)."""
    return [
        c["id"]
        for m in messages(rt, target, every=True, full=True)
        for c in m.get("tool_calls") or []
    ]


def test_a26_ls_lists_every_server_and_execution(rt: Path, agent_host: Host) -> None:
    run = ctl(rt, "ls")
    assert run.returncode == 0 and "no agent-channel server is running" in run.stdout
    with agent_host.serving(rt, AGENT, "--count", "3") as served:
        ids = served.ids(3)
        listing = ctl_json(rt, "ls")
        (server,) = listing["servers"]
        assert server["pid"] == served.proc.pid
        assert server["where"] == served.record["transport"]["path"]
        assert sorted(e["id"] for e in server["executions"]) == sorted(ids)
        for e in server["executions"]:
            assert {"title", "status", "turnState", "messageCount", "clients"} <= e.keys()
        text = ctl(rt, "ls").stdout
        assert all(i in text for i in ids) and f"pid {served.proc.pid}" in text


@pytest.mark.anyio
async def test_a26_send_reaches_the_agent_and_is_echoed_to_other_clients(
    rt: Path, agent_host: Host
) -> None:
    with agent_host.serving(rt, AGENT) as served:
        (target,) = await asyncio.to_thread(served.ids)
        rec = Recorder()
        reader, writer = await asyncio.open_unix_connection(
            served.record["transport"]["path"], limit=1 << 24
        )
        conn = ClientSideConnection(rec, writer, reader)  # pyright: ignore[reportArgumentType]
        try:
            with anyio.fail_after(GUARD):
                await conn.initialize(protocol_version=1)
                await conn.load_session(cwd=str(HERE), session_id=target, mcp_servers=[])
            run = await asyncio.to_thread(ctl, rt, "send", target[:6], "hello from a shell")
            assert run.returncode == 0, run.stderr
            assert run.stdout.strip() == f"sent to {target}"

            def said(kind: str, text: str) -> bool:  # chunks of one kind, joined
                return text in "".join(
                    u.get("content", {}).get("text", "")
                    for u in rec.updates[target]
                    if u["sessionUpdate"] == kind
                )

            await rec.wait_until(lambda: said("user_message_chunk", "hello from a shell"))
            await rec.wait_until(lambda: said("agent_message_chunk", "echo: hello from a shell"))
        finally:
            await conn.close()
            writer.close()
        texts = [m["text"] for m in await asyncio.to_thread(messages, rt, target)]
        assert "hello from a shell" in texts and "echo: hello from a shell" in texts


def test_a26_messages_reads_the_conversation_with_tail_all_and_full(
    rt: Path, agent_host: Host
) -> None:
    with agent_host.serving(rt, AGENT, "--input", "quick one") as served:
        (target,) = served.ids()
        wait_for(lambda: execution(rt, target)["status"] == "waiting for operator", "idle")
        envelope = ctl_json(rt, "messages")  # the only execution: no TARGET needed
        assert envelope["sessionId"] == target
        assert {"as_of", "status", "count", "messages"} <= envelope.keys()
        roles = [m["role"] for m in envelope["messages"]]
        assert roles[:2] == ["system", "user"] and "tool" in roles
        assert envelope["count"] == len(roles)
        (last,) = ctl_json(rt, "messages", target, "--tail", "1")["messages"]
        assert last["role"] == "assistant" and last["text"] == "the tool is done"
        full = ctl_json(rt, "messages", target, "--all", "--full")["messages"]
        assert len(full) == envelope["count"] and full[1]["content"] == "quick one"
        readable = ctl(rt, "messages", target[:8]).stdout
        assert readable.splitlines()[0].startswith(f"{target}  waiting for operator")
        assert "[tools: quick (" in readable  # with the call's id
        run = ctl(rt, "messages", "--all", "--tail", "2")
        assert run.returncode == 2 and "not allowed with" in run.stderr


def test_a26_cancel_tool_stops_one_call_and_the_turn_goes_on(rt: Path, agent_host: Host) -> None:
    with agent_host.serving(rt, AGENT, "--input", "block it") as served:
        (target,) = served.ids()
        wait_for(lambda: tool_call_ids(rt, target), "the blocking tool call")
        (call_id,) = tool_call_ids(rt, target)
        run = ctl(rt, "cancel-tool", target[:5], call_id)
        assert run.returncode == 0, run.stderr
        assert run.stdout.strip() == f"cancelled tool call {call_id} of {target}"
        wait_for(
            lambda: messages(rt, target)[-1]["text"] == "the tool is done",
            "the turn going on",
        )
        assert execution(rt, target)["turnState"] != "cancelled"
        again = ctl(rt, "cancel-tool", target, call_id, "--json")
        assert again.returncode == 1
        assert json.loads(again.stdout)["cancelled"] is False
        assert "was not cancelled" in again.stderr


def test_a26_cancel_interrupts_the_turn(rt: Path, agent_host: Host) -> None:
    with agent_host.serving(rt, AGENT, "--input", "block it") as served:
        (target,) = served.ids()
        wait_for(lambda: tool_call_ids(rt, target), "the blocking tool call")
        run = ctl(rt, "cancel", target)
        assert run.returncode == 0, run.stderr
        wait_for(lambda: execution(rt, target)["turnState"] == "cancelled", "turn cancelled")
        assert execution(rt, target)["status"] != "finished"  # an interrupt, not the end


def test_a26_queue_shows_unread_messages_and_withdraw_takes_one_back(
    rt: Path, agent_host: Host
) -> None:
    with agent_host.serving(rt, AGENT, "--input", "block it") as served:
        (target,) = served.ids()
        wait_for(lambda: tool_call_ids(rt, target), "the blocking tool call")
        assert ctl(rt, "send", target, "first later").returncode == 0
        assert ctl(rt, "send", target, "second later").returncode == 0
        queued: list[dict[str, Any]] = ctl_json(rt, "queue", target)["messages"]
        assert [q["text"] for q in queued] == ["first later", "second later"]
        assert "first later" in ctl(rt, "queue", target).stdout
        run = ctl(rt, "queue", target, "--withdraw", queued[0]["id"])
        assert run.returncode == 0, run.stderr
        left = ctl_json(rt, "queue", target)["messages"]
        assert [q["text"] for q in left] == ["second later"]
        again = ctl(rt, "queue", target, "--withdraw", queued[0]["id"])
        one_line_failure(again, "was not withdrawn")


def test_a26_end_finishes_the_execution_and_it_can_still_be_read(
    rt: Path, agent_host: Host
) -> None:
    with agent_host.serving(rt, AGENT, "--input", "block it", "--count", "2") as served:
        first, second = served.ids(2)
        wait_for(lambda: tool_call_ids(rt, first), "the blocking tool call")
        # on Ray: `serve --ray` ends it on the cluster (N1), as a local server ends its own
        run = ctl(rt, "end", first, "--reason", "done here")
        assert run.returncode == 0, run.stderr
        assert run.stdout.strip() == f"ended {first}"
        wait_for(lambda: execution(rt, first)["status"] == "finished", "finished")
        assert execution(rt, second)["status"] != "finished"  # only that one
        assert ctl_json(rt, "messages", first, "--all")["messages"]  # still readable
        one_line_failure(ctl(rt, "send", first, "too late"), "attachable")


def test_a26_failures_are_one_line_with_a_non_zero_exit(rt: Path, agent_host: Host) -> None:
    one_line_failure(ctl(rt, "send", "abc", "hi"), "no agent-channel server is running")
    with agent_host.serving(rt, AGENT, "--count", "2") as served:
        a, b = served.ids(2)
        one_line_failure(ctl(rt, "messages"), "2 executions are served")
        one_line_failure(ctl(rt, "send", "zzz-no-such", "hi"), "no execution matches")
        one_line_failure(ctl(rt, "cancel-tool", a, "no-such-call"), "was not cancelled")
        assert a != b
        one_line_failure(ctl(rt, "queue", ""), "matches 2 executions")  # "" prefixes both
        one_line_failure(ctl(rt, "send", a, "   "), "empty")
        usage = ctl(rt, "cancel-tool", a)
        assert usage.returncode == 2 and len(usage.stderr.strip().splitlines()) == 1


def test_a26_an_answer_over_the_verbs_read_limit_is_named(rt: Path) -> None:
    # A tool result of 17 MB: its conversation, read whole and raw, does not fit one frame.
    big = "big=17000000"
    with serving(rt, "--agent", "agents:attach_agent", "--input", big) as served:
        (target,) = served.ids()
        wait_for(lambda: execution(rt, target)["status"] == "waiting for operator", "idle")
        run = ctl(rt, "messages", target, "--all", "--full", "--json")
        one_line_failure(run, "over the 16 MiB")  # the server refuses it now; a verb, too
        assert ctl_json(rt, "messages", target)["count"] >= 3  # the previews still fit


def test_a26_the_verbs_do_not_import_the_acp_sdk(rt: Path, agent_host: Host) -> None:
    """A verb is a fresh process each time: importing the SDK (~1 s of schema building) would
    be most of it, so the verbs speak their few methods without it; nor do they build the
    core's pydantic models (a third of a second more: the shell verbs lost that once, when
    the CLI imported the core's seam for one exception type)."""
    import subprocess
    import sys

    from serving import env

    script = (
        "import runpy, sys\n"
        "sys.argv = ['agent-channel-acp', *sys.argv[1:]]\n"
        "try:\n"
        "    runpy.run_module('agent_channel_acp', run_name='__main__')\n"
        "except SystemExit as e:\n"
        "    code = e.code\n"
        "heavy = [m for m in ('acp', 'pydantic') if m in sys.modules]\n"
        "print(f'imported {heavy}' if heavy else 'no sdk', code, file=sys.stderr)\n"
    )
    with agent_host.serving(rt, AGENT, "--input", "block it") as served:
        (target,) = served.ids()
        for verb in (["ls"], ["send", target, "hello"], ["queue", target], ["cancel", target]):
            run = subprocess.run(
                [sys.executable, "-c", script, *verb],
                env=env(rt),
                capture_output=True,
                text=True,
                cwd=HERE,
                timeout=GUARD,
            )
            assert run.stderr.strip().endswith("no sdk 0"), (verb, run.stderr)


def test_a26_the_verbs_present_the_token_on_tcp(rt: Path, agent_host: Host) -> None:
    """Over TCP a client must present the discovery record's token in ``initialize``; the
    verbs' own client does, so every verb works there as on the unix socket."""
    with agent_host.serving(rt, AGENT, "--port", "0") as served:
        assert served.record["transport"]["kind"] == "tcp"
        (target,) = served.ids()
        assert ctl(rt, "send", target, "over tcp").returncode == 0
        wait_for(lambda: any(m.get("text") == "over tcp" for m in messages(rt, target)), "echo")
        (server,) = ctl_json(rt, "ls")["servers"]
        assert server["transport"] == "tcp" and "error" not in server


def test_ls_lists_the_servers_that_answer_and_fails_for_one_that_does_not(rt: Path) -> None:
    """Issue 29, item 14: a local server that does not answer (its record names a live
    process whose socket is gone) is one line on stderr and exit status 1; the others are
    still listed (``--json``: its entry carries the error)."""
    import subprocess
    import sys

    from agent_channel_acp.wire._discovery import process_start

    with serving(rt, "--agent", AGENT) as served:
        served.ids(1)
        mute = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        try:
            record = {
                "version": 1,
                "pid": mute.pid,
                "pid_start": process_start(mute.pid),
                "started_at": 1.0,
                "transport": {"kind": "unix", "path": str(rt / "gone.sock")},
                "executions": [],
            }
            (rt / f"{mute.pid}.json").write_text(json.dumps(record))
            (rt / f"{mute.pid}.json").chmod(0o600)
            text = ctl(rt, "ls")
            assert text.returncode == 1 and f"pid {served.proc.pid}" in text.stdout
            (line,) = text.stderr.strip().splitlines()
            assert f"pid {mute.pid}" in line and "not answering" in line
            assert "gone.sock" not in text.stdout
            as_json = ctl(rt, "ls", "--json")
            assert as_json.returncode == 1
            entries = {e["pid"]: e for e in json.loads(as_json.stdout)["servers"]}
            assert "error" in entries[mute.pid] and "executions" in entries[served.proc.pid]
        finally:
            mute.kill()
            mute.wait()
