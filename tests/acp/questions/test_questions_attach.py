"""The model's questions in attach mode (Q4; docs/questions.md): asked of the driver, moved
to the next driver when it leaves, never asked of an observer; the ``answer`` request.

SDK clients on a real attach server subprocess (``attach_server.py``) running
``question_agents:asking_agent``, whose task asks at once.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp.client.connection import ClientSideConnection
from acp.schema import (
    AcceptElicitationResponse,
    AllowedOutcome,
    ClientCapabilities,
    ElicitationCapabilities,
    ElicitationFormCapabilities,
    RequestPermissionResponse,
)
from attach_harness import AttachRecorder, Client, Server, serving
from conftest import GUARD, HERE, agent_env

pytestmark = pytest.mark.anyio


@dataclass
class Person(AttachRecorder):
    """An attach client that records the questions it is asked; answers forms with
    ``form_reply`` (None: never answers) and permission requests by picking ``pick``."""

    forms: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    completed: list[str] = field(default_factory=list[str])
    form_reply: dict[str, Any] | None = None

    async def create_elicitation(self, message: str, mode: Any, **kwargs: Any) -> Any:
        self.forms.append({"message": message, "sessionId": mode.session_id, "meta": kwargs})
        self._poke()
        if self.form_reply is None:
            await asyncio.Event().wait()
        return AcceptElicitationResponse(action="accept", content=self.form_reply)

    async def complete_elicitation(self, elicitation_id: str, **kwargs: Any) -> None:
        self.completed.append(elicitation_id)
        self._poke()


def picking(option_id: str) -> Any:
    async def policy(request: dict[str, Any]) -> RequestPermissionResponse:
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=option_id)
        )

    return policy


async def connect(server: Server, rec: Person, *, elicitation: bool) -> Client:
    reader, writer = await asyncio.open_unix_connection(server.path, limit=1 << 24)
    conn = ClientSideConnection(
        rec, writer, reader, observers=[rec.observe], use_unstable_protocol=True
    )
    caps = ClientCapabilities(
        elicitation=ElicitationCapabilities(form=ElicitationFormCapabilities())
        if elicitation
        else None
    )
    with anyio.fail_after(GUARD):
        await conn.initialize(protocol_version=1, client_capabilities=caps)
    client = Client(conn, rec, writer)
    server.clients.append(client)
    return client


@asynccontextmanager
async def asking(task: str) -> AsyncIterator[Server]:
    async with serving("--agent", "question_agents:asking_agent", "--input", task) as server:
        yield server


async def pending(c: Client, sid: str) -> dict[str, Any]:
    """The execution's pending question, once the list shows one (polled: a condition)."""
    with anyio.fail_after(GUARD):
        while True:
            listed = (await c.ext("list"))["executions"]
            entry = next(e for e in listed if e["id"] == sid)
            if "pendingQuestion" in entry:
                return entry["pendingQuestion"]
            await anyio.lowlevel.checkpoint()


async def test_q4_the_question_moves_to_the_next_driver_when_the_first_leaves() -> None:
    async with asking("choose") as server:
        (sid,) = server.ids
        first = await connect(server, Person(), elicitation=True)  # never answers
        assert await first.new() == sid
        await first.until(lambda: first.rec.forms)
        assert first.rec.forms[0]["message"] == "Which colour?"
        await first.close()

        second_rec = Person(policy=picking("choice-0"))
        second = await connect(server, second_rec, elicitation=False)
        assert await second.new() == sid
        await second.until(lambda: "answer: red" in second.rec.texts(sid))
        (asked,) = second.rec.permissions
        assert asked["options"] == ["choice-0", "choice-1", "decline"]
        assert "pendingQuestion" not in next(
            e for e in (await second.ext("list"))["executions"] if e["id"] == sid
        )


async def test_q4_an_observer_is_never_asked_the_driver_is() -> None:
    async with asking("choose") as server:
        (sid,) = server.ids
        watcher = await connect(server, Person(form_reply={"answer": "red"}), elicitation=True)
        await watcher.load(sid, observe=True)
        question = await pending(watcher, sid)
        assert question["text"] == "Which colour?" and question["choices"] == ["red", "blue"]
        driver = await connect(server, Person(form_reply={"answer": "blue"}), elicitation=True)
        assert await driver.new() == sid
        await watcher.until(lambda: "answer: blue" in watcher.rec.texts(sid))
        assert len(driver.rec.forms) == 1
        assert watcher.rec.forms == [] and watcher.rec.permissions == []


async def test_q4_the_answer_request_answers_and_voids_the_drivers_form() -> None:
    async with asking("choose") as server:
        (sid,) = server.ids
        driver = await connect(server, Person(), elicitation=True)  # never answers
        await driver.new()
        await driver.until(lambda: driver.rec.forms)
        operator = await connect(server, Person(), elicitation=False)  # not bound at all
        question = await pending(operator, sid)
        done = await operator.ext("answer", sessionId=sid, text="green")
        assert done == {"answered": True, "questionId": question["id"]}
        await driver.until(lambda: "answer: green" in driver.rec.texts(sid))
        await driver.until(lambda: driver.rec.completed)
        assert driver.rec.completed == [driver.rec.forms[0]["meta"]["agent_channel.questionId"]]
        again = await operator.ext("answer", sessionId=sid, text="late")
        assert again == {"answered": False, "reason": "no question is waiting"}


async def test_q4_a_question_asked_as_a_message_takes_the_next_prompt_of_a_driver() -> None:
    async with asking("free") as server:
        (sid,) = server.ids
        driver = await connect(server, Person(), elicitation=False)
        await driver.new()
        await driver.until(lambda: "[question] What is the deadline?" in driver.rec.texts(sid))
        with anyio.fail_after(GUARD):
            answered = await driver.prompt(sid, "Friday noon")
        assert answered["_meta"]["agent_channel.answered"]
        await driver.until(lambda: "answer: Friday noon" in driver.rec.texts(sid))


@asynccontextmanager
async def on_a_trio_thread(tmp: Path, task: str, *args: str) -> AsyncIterator[tuple[Server, str]]:
    """``question_program.py``: the asking agent on a trio thread, served by ``attachable``."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(HERE / "question_program.py"),
        str(tmp / "sock"),
        task,
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env=agent_env(),
    )
    assert proc.stdout is not None and proc.stdin is not None
    with anyio.fail_after(GUARD * 3):
        info = json.loads(await proc.stdout.readline())
    server = Server(Path(info["socket"]), [info["id"]], proc, tmp)
    try:
        yield server, info["id"]
    finally:
        await server.stop()


async def test_q4_a_question_from_an_execution_on_a_trio_thread_reaches_the_driver(
    tmp_path: Path,
) -> None:
    """The resolver runs on the server's loop; the question is asked from the execution's
    own thread and loop (trio), and its answer crosses back."""
    async with on_a_trio_thread(tmp_path, "choose") as (server, sid):
        driver = await connect(server, Person(form_reply={"answer": "blue"}), elicitation=True)
        await driver.load(sid)
        await driver.until(lambda: "answer: blue" in driver.rec.texts(sid))
        assert driver.rec.forms[0]["message"] == "Which colour?"


async def test_q3_a_cancel_crosses_to_a_question_asked_on_a_trio_thread(tmp_path: Path) -> None:
    async with on_a_trio_thread(tmp_path, "choose") as (server, sid):
        driver = await connect(server, Person(), elicitation=True)  # never answers
        await driver.load(sid)
        await driver.until(lambda: driver.rec.forms)
        await driver.cancel(sid)
        await driver.until(lambda: driver.rec.completed)  # the form is void
        await driver.until(lambda: "cancelled" in driver.rec.states(sid))  # then parked or ended
        assert driver.rec.completed == [driver.rec.forms[0]["meta"]["agent_channel.questionId"]]


async def test_a20_an_approval_asked_from_an_execution_on_a_trio_thread_is_answered(
    tmp_path: Path,
) -> None:
    """Under ``--approve`` the approval crosses threads as the question does: the driver
    allows the tool, the tool runs (its child asks, the form answers ``web``)."""
    async with on_a_trio_thread(tmp_path, "child", "--approve") as (server, sid):
        driver = await connect(server, Person(form_reply={"answer": "web"}), elicitation=True)
        await driver.load(sid)
        await driver.until(lambda: driver.rec.permissions and driver.rec.forms)
        (asked,) = driver.rec.permissions
        assert asked["toolCall"]["title"] == "Asking through a child"
        await driver.until(lambda: "Result:\nweb" in driver.rec.texts(sid))
