"""The console's fold of the attach wire, fed recorded notifications (the shapes the attach
server sends, A5-A25); the app and the demo script draw from it."""

from __future__ import annotations

import json
from typing import Any

from agent_channel_acp.operator.console._link import Link
from agent_channel_acp.operator.console._state import MAX_ENTRIES, MAX_TEXT, State, form_of

M = "agent_channel."


def chunk(kind: str, text: str, mid: str, **meta: Any) -> dict[str, Any]:
    update: dict[str, Any] = {
        "sessionUpdate": kind,
        "content": {"type": "text", "text": text},
        "messageId": mid,
    }
    if meta:
        update["_meta"] = {M + k: v for k, v in meta.items()}
    return update


def queue(state: State, *items: tuple[str, str]) -> None:
    state.notification(
        "_agent_channel/queue",
        {"messages": [{"id": i, "text": t, "client": f"{state.client_name}-x"} for i, t in items]},
    )


def test_a5_bind_confirmation_sets_role_and_is_not_shown() -> None:
    s = State()
    s.update(
        chunk(
            "agent_message_chunk",
            "Bound to x\n",
            "b",
            bound={"executionId": "e1", "interactive": True},
        )
    )
    s.notification("_agent_channel/turn_state", {"sessionId": "e1", "state": "started"})
    assert (s.role, s.execution_id) == ("driver", "e1")
    assert not s.entries
    assert s.activity == "connecting"
    s.connection = "connected"
    assert s.activity == "running · turn started"


def test_s9_chunks_of_one_message_join_and_reasoning_is_its_own_entry() -> None:
    s = State()
    s.update(chunk("agent_thought_chunk", "let me ", "m1"))
    s.update(chunk("agent_thought_chunk", "think", "m1"))
    s.update(chunk("agent_message_chunk", "Hello ", "m1"))
    s.update(chunk("agent_message_chunk", "there", "m1"))
    kinds = [(e.kind, e.text) for e in s.entries.values()]
    assert kinds == [("reasoning", "let me think"), ("agent", "Hello there")]


def echo(text: str, mid: str = "u1") -> dict[str, Any]:
    return chunk("user_message_chunk", text, mid, source="operator", role="user")


def test_a7_queued_line_replaced_by_the_folded_echo() -> None:
    s = State()
    first, second = s.queued("one"), s.queued("two")
    s.sent(first, "q1")
    s.sent(second, "q2")
    queue(s, ("q1", "one"), ("q2", "two"))
    queue(s)  # the boundary drained both...
    s.update(echo("one\n\ntwo"))
    assert [e.kind for e in s.entries.values()] == ["operator"]  # ...one echo replaced both


def test_a7_echo_replaces_only_the_message_read_not_an_identical_one_still_queued() -> None:
    s = State()
    first = s.queued("same")
    s.sent(first, "q1")
    queue(s, ("q1", "same"))
    second = s.queued("same")  # typed while the agent folds the first in
    queue(s)
    s.update(echo("same"))
    assert first.key not in s.entries
    assert second.key in s.entries  # still waiting on the server: still shown queued
    s.sent(second, "q2")
    queue(s, ("q2", "same"))
    s.withdrawn("q2")
    assert second.key not in s.entries


def test_a25_withdraw_one_of_two_identical_messages_the_right_one_goes() -> None:
    s = State()
    first, second = s.queued("same"), s.queued("same")
    s.sent(first, "q1")
    s.sent(second, "q2")
    queue(s, ("q1", "same"), ("q2", "same"))
    s.withdrawn("q1")  # the older one, as another operator's `queue --withdraw` could
    queue(s, ("q2", "same"))
    s.update(chunk("agent_message_chunk", "working", "m2"))
    assert first.key not in s.entries and second.key in s.entries
    queue(s)
    s.update(echo("same"))
    assert second.key not in s.entries
    assert [e.kind for e in s.entries.values()] == ["note", "agent", "operator"]


def test_a7_an_id_answered_after_the_queue_moved_on_settles_the_line() -> None:
    s = State()
    queue(s, ("q1", "fast"))
    line = s.queued("fast")
    queue(s)
    s.update(echo("fast"))  # the queue and the echo overtook the prompt's answer
    s.sent(line, "q1")
    assert line.key not in s.entries


def test_a25_message_withdrawn_elsewhere_leaves_with_a_note() -> None:
    s = State()
    mine = s.queued("later")
    s.sent(mine, "q1")
    queue(s, ("q1", "later"))
    queue(s)  # gone from the queue, and what follows is no echo
    s.update(chunk("agent_message_chunk", "working", "m2"))
    assert mine.key not in s.entries
    assert any("withdrawn elsewhere: later" in e.text for e in s.entries.values())


def test_a10_a22_failed_card_with_a_cancel_result_shows_cancelled() -> None:
    s = State()
    s.update(
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "c1",
            "title": "Search",
            "status": "in_progress",
            "rawInput": {"q": 1},
        }
    )
    assert s.running_tools()[0].label == "running"
    s.update(
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "c1",
            "status": "failed",
            "content": [
                {
                    "type": "content",
                    "content": {"type": "text", "text": "Tool call cancelled by the operator."},
                }
            ],
        }
    )
    card = s.entries["tool:c1"]
    assert (card.status, card.label) == ("cancelled", "cancelled")
    assert card.line() == '[tool cancelled] Search {"q": 1} -> Tool call cancelled by the operator.'


def test_a17_end_message_lists_undelivered_and_drops_queued_lines() -> None:
    s = State()
    s.queued("too late")
    s.notification(
        "_agent_channel/session_ended",
        {
            "sessionId": "e",
            "stopReason": "cancelled",
            "undelivered": [{"id": "q", "text": "too late"}],
        },
    )
    texts = [e.text for e in s.entries.values()]
    assert len(texts) == 1 and "ended (cancelled)" in texts[0] and "- too late" in texts[0]
    s.connection = "connected"
    assert s.activity == "finished · turn ended"


def test_bounds_entries_and_text() -> None:
    s = State()
    for i in range(MAX_ENTRIES + 10):
        s.update(chunk("agent_message_chunk", "x", f"m{i}"))
    assert len(s.entries) == MAX_ENTRIES
    assert len(s.removed) == 10
    s.update(chunk("agent_message_chunk", "y" * (MAX_TEXT + 5), "big"))
    assert len(s.entries["msg:big:agent"].text) == MAX_TEXT


def test_link_folds_stream_lines_in_order_and_passes_requests_and_responses_on() -> None:
    """The link's reader folds notifications itself (the SDK would validate each and start a
    task); what it does not take goes on to the SDK."""
    link = Link(State())
    link.session_id = "s"

    def line(message: dict[str, Any]) -> bytes:
        return json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n"

    def update(session: str, text: str) -> bytes:
        params = {"sessionId": session, "update": chunk("agent_message_chunk", text, "m")}
        return line({"method": "session/update", "params": params})

    assert link.fold(update("s", "one "))
    assert link.fold(update("other", "not ours "))  # taken, not shown
    assert link.fold(update("s", "two"))
    queued = {"sessionId": "s", "messages": [{"id": "q1", "text": "x", "client": "c-1"}]}
    assert link.fold(line({"method": "_agent_channel/queue", "params": queued}))
    bad = {"sessionId": "s", "update": {"sessionUpdate": "user_message_chunk", "_meta": "x"}}
    assert link.fold(line({"method": "session/update", "params": bad}))  # skipped, goes on
    assert [e.text for e in link.state.entries.values() if e.kind == "agent"] == ["one two"]
    assert [q.id for q in link.state.queue] == ["q1"]
    assert not link.fold(line({"id": 3, "result": {"stopReason": "end_turn"}}))
    assert not link.fold(line({"id": 4, "method": "session/request_permission", "params": {}}))
    assert not link.fold(b"not json\n")


def test_a9_text_of_an_interrupted_model_call_is_marked_not_left_as_said() -> None:
    """The completion marker of a cancelled model call names the message it streamed: that
    text never entered the conversation, and the entry says so (issue 16)."""
    s = State()
    s.update(chunk("agent_thought_chunk", "hmm", "m1"))
    s.update(chunk("agent_message_chunk", "First, a search.", "m1"))
    s.update(chunk("agent_message_chunk", "Kept.", "m0"))
    s.update(chunk("agent_message_chunk", "", "m1", modelCall={"id": "c1", "status": "cancelled"}))
    marked = {e.key: e.interrupted for e in s.entries.values()}
    assert marked == {"msg:m1:reasoning": True, "msg:m1:agent": True, "msg:m0:agent": False}
    line = s.entries["msg:m1:agent"].line()
    assert line == "agent (interrupted: not in the conversation): First, a search."


def test_turn_state_is_said_in_the_words_of_ls() -> None:
    """One vocabulary (issue 16): the execution's status as `ls` says it (running, waiting
    for operator, finished, failed), then the turn state; never "idle" alone."""
    s = State(connection="connected")
    said: list[str] = [s.activity]
    for state in ("started", "cancelled", "started", "ended"):
        s.notification("_agent_channel/turn_state", {"sessionId": "e", "state": state})
        said.append(s.activity)
    assert said == [
        "waiting for operator · turn idle",
        "running · turn started",
        "waiting for operator · turn cancelled: send a redirect",
        "running · turn started",
        "waiting for operator · turn ended",
    ]
    s.approval = {"toolCall": {}, "options": []}
    assert s.activity == "waiting for operator · approval pending"


def test_a_failed_execution_says_failed() -> None:
    s = State(connection="connected")
    s.notification("_agent_channel/turn_state", {"sessionId": "e", "state": "started"})
    s.notification(
        "_agent_channel/session_ended",
        {
            "sessionId": "e",
            "stopReason": None,
            "error": "ModelError: unreachable",
            "undelivered": [],
        },
    )
    (note,) = [e.text for e in s.entries.values()]
    assert note.startswith("The execution failed: ModelError: unreachable.")
    assert (s.status, s.activity) == ("failed", "failed · turn started")


def test_d5_the_picker_says_when_an_execution_was_restored() -> None:
    from agent_channel_acp.operator.console._widgets import target_label

    entry: Any = {"id": "3f2a9c", "title": "task", "status": "running", "restored": 0.0}
    assert "restored" not in target_label(entry)  # 0: never
    entry["restored"] = 1_796_196_000.0
    assert " · restored " in target_label(entry)


def test_a_questions_form_takes_a_choice_by_number_or_words_and_says_a_misfit() -> None:
    """The schema the server sends for a choice (Q2): one ``answer`` with an ``enum``."""
    schema = {"properties": {"answer": {"type": "string", "enum": ["red", "blue"]}}}
    form = form_of("q1", "Which colour?", {**schema, "required": ["answer"]})
    assert not form.fill("7") and form.error == '"7" is not one of the choices'
    assert not form.fill("green") and form.current is not None
    assert form.fill("2") and form.current is None and form.content() == {"answer": "blue"}
    by_words = form_of("q2", "Which colour?", schema)
    assert by_words.fill("RED") and by_words.content() == {"answer": "red"}


def test_a_questions_form_is_filled_field_after_field_each_as_its_kind() -> None:
    props = {
        "city": {"type": "string", "title": "City"},
        "days": {"type": "integer", "title": "Days"},
        "budget": {"type": "number", "title": "Budget"},
        "visa": {"type": "boolean", "title": "Visa"},
        "notes": {"type": "string", "title": "Notes"},
    }
    form = form_of("q", "Trip?", {"properties": props, "required": ["city", "days", "visa"]})
    assert not form.fill("") and form.error == "City is required"
    assert form.fill("Lisbon")
    assert not form.fill("three") and form.error == "Days takes a whole number"
    assert form.fill("3")
    assert form.fill("")  # Budget is optional: Enter alone skips it
    assert not form.fill("maybe") and form.error == "Visa takes y or n"
    assert form.fill("y") and form.current is not None and form.current.name == "notes"
    assert form.fill("window seat") and form.current is None
    assert form.content() == {"city": "Lisbon", "days": 3, "visa": True, "notes": "window seat"}
