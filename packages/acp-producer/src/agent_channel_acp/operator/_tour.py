"""``agent-channel-acp demo``: a guided run of the demo agent through a real ACP client.

It starts ``agent-channel-acp stdio --demo`` as a subprocess, exactly as an
editor would, and plays an operator: a prompt, a stop in the middle of a
tool call, a redirect, and a message queued while the agent works. What the
agent streams back is printed as it arrives (``--json``: one JSON object per
line, for programs). Ctrl-C ends it quietly with exit status 130.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from acp import PROTOCOL_VERSION, Client, RequestError, spawn_agent_process, text_block
from acp.schema import (
    AgentMessageChunk,
    PermissionOption,
    RequestPermissionResponse,
    ToolCallProgress,
    ToolCallStart,
    ToolCallUpdate,
)

from .._sigint import run

if TYPE_CHECKING:
    from .console._client import SessionUpdate


class _Operator:
    """The client side: prints updates and lets the script wait on them."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.t0 = time.perf_counter()
        self.changed = asyncio.Event()
        self.tools_started = 0  # a count, not a flag: a quick tool may start and end unseen
        self._open_text: str | None = None

    def emit(self, who: str, text: str, **data: object) -> None:
        ms = (time.perf_counter() - self.t0) * 1000
        if self.as_json:
            print(json.dumps({"t_ms": round(ms, 1), "who": who, "text": text, **data}), flush=True)
            return
        if self._open_text is not None:
            print(flush=True)
            self._open_text = None
        print(f"{ms:8.1f} ms  {who:<9} {text}", flush=True)

    async def session_update(
        self, session_id: str, update: SessionUpdate, **kwargs: object
    ) -> None:
        if isinstance(update, AgentMessageChunk) and not self.as_json:
            text = getattr(update.content, "text", "")
            if self._open_text != update.message_id:
                if self._open_text is not None:
                    print(flush=True)
                ms = (time.perf_counter() - self.t0) * 1000
                print(f"{ms:8.1f} ms  {'agent':<9} ", end="", flush=True)
                self._open_text = update.message_id
            print(text, end="", flush=True)
        elif isinstance(update, AgentMessageChunk):
            self.emit("agent", getattr(update.content, "text", ""), message_id=update.message_id)
        elif isinstance(update, ToolCallStart):
            self.tools_started += 1
            self.emit(
                "tool", f"▶ {update.title} ({update.status})", tool_call_id=update.tool_call_id
            )
        elif isinstance(update, ToolCallProgress):
            self.emit("tool", f"■ {update.tool_call_id}: {update.status}", status=update.status)
        self.changed.set()

    async def request_permission(
        self,
        session_id: str,
        tool_call: ToolCallUpdate,
        options: list[PermissionOption],
        **kwargs: object,
    ) -> RequestPermissionResponse:
        raise RuntimeError("the demo runs without tool approval")

    async def until(self, predicate: Callable[[], bool]) -> None:
        while not predicate():
            self.changed.clear()
            await self.changed.wait()


async def _tour(as_json: bool, tool_seconds: float) -> int:
    op = _Operator(as_json)
    env = dict(os.environ, AGENT_CHANNEL_DEMO_TOOL_SECONDS=str(tool_seconds))
    # the tour tells the scripted model's story, whatever model the environment names
    command = [sys.executable, "-m", "agent_channel_acp", "stdio", "--demo", "--model", "scripted"]
    op.emit("demo", "starting the agent as an editor would: " + " ".join(command[2:]))
    async with spawn_agent_process(
        cast("Client", op), command[0], *command[1:], env=env, transport_kwargs={"stderr": None}
    ) as (conn, _proc):
        init = await conn.initialize(protocol_version=PROTOCOL_VERSION)
        info = init.agent_info
        op.emit(
            "demo", f"connected to {info.name if info else 'agent'} {info.version if info else ''}"
        )
        session = (await conn.new_session(cwd=os.getcwd())).session_id

        async def prompt(text: str) -> str:
            op.emit("operator", f"> {text}")
            started = time.perf_counter()
            response = await conn.prompt(session_id=session, prompt=[text_block(text)])
            op.emit(
                "agent",
                f"✓ prompt answered: {response.stop_reason}",
                stop_reason=response.stop_reason,
                ms=round((time.perf_counter() - started) * 1000, 1),
            )
            return response.stop_reason

        async with asyncio.TaskGroup() as tasks:  # Ctrl-C: every prompt is awaited, quietly
            # 1. a prompt, stopped while its tool runs
            first = tasks.create_task(prompt("What do you know about interruptible agents?"))
            await op.until(lambda: op.tools_started >= 1)
            op.emit("operator", "✋ stop (session/cancel), mid-tool")
            await conn.cancel(session_id=session)
            reasons = [await first]
            # 2. the redirect: the model sees the repaired conversation
            reasons.append(await prompt("Never mind that. Just tell me what the notes say."))
            # 3. a message queued while the agent works: folded in at its next step
            seen = op.tools_started
            third = tasks.create_task(prompt("Summarise it in one line."))
            await op.until(lambda: op.tools_started > seen)
            queued = tasks.create_task(prompt("...and keep it friendly."))
            reasons += [await third, await queued]
    op.emit("demo", "done", stop_reasons=reasons)
    return 0 if reasons[0] == "cancelled" and "end_turn" in reasons[1:] else 1


def run_tour(as_json: bool = False, tool_seconds: float = 1.5) -> int:
    """Run the guided demo; the exit status says whether it behaved as described."""
    try:
        return run(_tour(as_json, tool_seconds))
    except KeyboardInterrupt:
        return 130
    except Exception as e:
        lost = _lost_agent(e)
        if lost is None:
            raise
        print(f"agent-channel-acp demo: the agent stopped answering ({lost})", file=sys.stderr)
        return 1


def _lost_agent(e: BaseException) -> BaseException | None:
    """The connection failure ``e`` is (or a task group's first one), else None."""
    if isinstance(e, BaseExceptionGroup):
        group = cast("BaseExceptionGroup[BaseException]", e)
        found = (_lost_agent(inner) for inner in group.exceptions)
        return next((x for x in found if x is not None), None)
    return e if isinstance(e, ConnectionError | RequestError) else None
