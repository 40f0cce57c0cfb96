"""What the console shows, folded from the attach wire; no terminal and no ``acp`` here.

The console, the demo's operator script and the tests all read an execution through this
one fold: ``session/update`` payloads (as the JSON the SDK serialises, camelCase, with
``_meta``) and our ``_agent_channel/*`` notifications go in, and a list of entries comes
out, each keyed so a widget can be updated in place. A bind resets everything, because the
bind's replay (A5, A6) brings the conversation again.

Bounds: at most :data:`MAX_ENTRIES` entries are kept (the oldest go first) and one entry's
text at most :data:`MAX_TEXT` characters (the head is cut), so a long run costs bounded
memory however fast it streams.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypedDict

if TYPE_CHECKING:
    from ...wire._frames import JsonObject, JsonValue

META = "agent_channel."
MAX_ENTRIES = 2000
"""Entries kept (messages, cards, notes); the oldest are dropped past this."""
MAX_TEXT = 20_000
"""Characters kept of one entry's text (its tail: where the stream is)."""
INTERRUPTED = "interrupted: not in the conversation"
"""How streamed text that an interrupt kept out of the conversation is marked."""
MAX_LEFT = 256
"""Our message ids remembered after they left the queue."""


class Approval(TypedDict):
    """A permission request waiting for this client, as JSON (the link dumps the SDK's
    models into it): what the side panel shows and the keys answer."""

    toolCall: JsonObject
    options: list[JsonObject]


@dataclass
class Field:
    """One field of a question's form (a property of the ``elicitation/create`` schema)."""

    name: str
    title: str
    kind: str = "string"
    """``string``, ``number``, ``integer`` or ``boolean``."""
    choices: list[str] = field(default_factory=list[str])
    """The property's ``enum``: the answer is one of them."""
    required: bool = True


@dataclass
class Form:
    """A question from the model waiting for this console (``elicitation/create``, Q2): its
    fields are filled one after the other from the input line, then it is answered."""

    question_id: str
    text: str
    fields: list[Field]
    values: dict[str, object] = field(default_factory=dict[str, object])
    error: str = ""
    """Why the last input was not taken (not one of the choices, not a number)."""

    @property
    def current(self) -> Field | None:
        """The field the next input fills (None: all are filled)."""
        return next((f for f in self.fields if f.name not in self.values), None)

    def fill(self, text: str) -> bool:
        """Take ``text`` for the current field; False (and :attr:`error` says why) if it
        does not fit. An empty text skips a field that is not required."""
        f = self.current
        if f is None:
            return False
        text = text.strip()
        value = parse(f, text) if text or f.required else None
        if isinstance(value, Rejected):
            self.error = value.why
            return False
        self.error = ""
        self.values[f.name] = value
        return True

    def content(self) -> dict[str, object]:
        """The values to answer with (a skipped field is left out)."""
        return {k: v for k, v in self.values.items() if v is not None}


@dataclass
class Rejected:
    why: str


_YES = ("y", "yes", "true", "1")
_NO = ("n", "no", "false", "0")


def parse(f: Field, text: str) -> object:
    """``text`` as ``f``'s value: a choice by its number or its words, a number, a yes/no;
    :class:`Rejected` when it is none of what ``f`` takes."""
    if f.choices:
        if text.isdigit() and 1 <= int(text) <= len(f.choices):
            return f.choices[int(text) - 1]
        same = [c for c in f.choices if c.casefold() == text.casefold()]
        if same:
            return same[0]
        return Rejected(f'"{text}" is not one of the choices')
    if not text:
        return Rejected(f"{f.title} is required")
    if f.kind == "integer":
        try:
            return int(text)
        except ValueError:
            return Rejected(f"{f.title} takes a whole number")
    if f.kind == "number":
        try:
            return float(text)
        except ValueError:
            return Rejected(f"{f.title} takes a number")
    if f.kind == "boolean":
        if text.casefold() in _YES + _NO:
            return text.casefold() in _YES
        return Rejected(f"{f.title} takes y or n")
    return text


def form_of(question_id: str, text: str, schema: JsonObject) -> Form:
    """The form an ``elicitation/create`` request's schema describes."""
    props = schema.get("properties")
    required = schema.get("required")
    needed = {str(r) for r in required} if isinstance(required, list) else set[str]()
    fields: list[Field] = []
    for name, prop in (props if isinstance(props, dict) else {}).items():
        p = prop if isinstance(prop, dict) else {}
        enum = p.get("enum")
        fields.append(
            Field(
                name,
                str(p.get("title") or name),
                str(p.get("type") or "string"),
                [str(c) for c in enum] if isinstance(enum, list) else [],
                name in needed,
            )
        )
    return Form(question_id, text, fields)


TOOL_LABELS = {
    "pending": "pending",
    "in_progress": "running",
    "completed": "done",
    "failed": "failed",
    "cancelled": "cancelled",
}


@dataclass
class Entry:
    """One thing in the conversation: a message, reasoning, a tool card, a queued message,
    or a note from the console itself."""

    key: str
    kind: str
    """``operator``, ``user``, ``system``, ``agent``, ``reasoning``, ``tool``, ``queued``,
    ``note``."""
    text: str = ""
    title: str = ""
    tool_kind: str = ""
    status: str = ""
    """A tool card's status: pending, in_progress, completed, failed or cancelled."""
    args: JsonValue = None
    result: str = ""
    message_id: str = ""
    """A queued entry: the server's id of the message (the prompt response names it)."""
    interrupted: bool = False
    """Streamed text of a model call the operator interrupted: the conversation never got
    it (A9), so it is shown marked, like a cancelled card."""

    def add_text(self, text: str) -> None:
        joined = self.text + text
        self.text = joined[-MAX_TEXT:] if len(joined) > MAX_TEXT else joined

    @property
    def label(self) -> str:
        return TOOL_LABELS.get(self.status, self.status)

    def line(self) -> str:
        """The entry as plain text (the demo's transcript, tests)."""
        if self.kind == "tool":
            args = "" if self.args is None else " " + compact(self.args)
            out = f"[tool {self.label}] {self.title}{args}"
            return f"{out} -> {self.result}" if self.result else out
        prefix = {
            "operator": "operator> ",
            "user": "user> ",
            "system": "system> ",
            "agent": "agent: ",
            "reasoning": "(thinking) ",
            "queued": "operator (queued)> ",
            "note": "-- ",
        }.get(self.kind, "")
        if self.interrupted:
            prefix = prefix.rstrip(": ") + f" ({INTERRUPTED}): "
        return prefix + self.text.strip()


def compact(value: JsonValue) -> str:
    """A JSON value on one line, at most 200 characters (a card's arguments or result)."""
    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        text = str(value)
    return text if len(text) <= 200 else text[:199] + "…"


def _quote(text: str) -> str:
    """A message as a note quotes it: its head, at most 200 characters."""
    text = text.strip()
    return text if len(text) <= 200 else text[:199] + "…"


def _object(value: JsonValue) -> JsonObject:
    """``value``, which the fold reads as an object: anything else is a shape it does not
    know (the link skips the frame)."""
    if not isinstance(value, dict):
        raise TypeError(f"expected an object, not {type(value).__name__}")
    return value


def _text_of(block: JsonValue) -> str:
    if isinstance(block, dict):
        b = block
        if b.get("type") == "text":
            return str(b.get("text", ""))
        if b.get("type") == "content":
            return _text_of(b.get("content"))
        if b.get("type") == "resource_link":
            return f"[link {b.get('uri', '')}]"
        return f"[{b.get('type', 'content')}]"
    return ""


@dataclass
class Queued:
    """One entry of the server's pending queue (A25)."""

    id: str
    text: str
    client: str
    mine: bool


@dataclass
class State:
    """The console's picture of one bound execution (see the module docstring)."""

    client_name: str = "console"
    """Our ``clientInfo.name``: the server names our queue entries ``<this>-<suffix>``."""
    entries: OrderedDict[str, Entry] = field(default_factory=OrderedDict[str, Entry])
    changed: list[str] = field(default_factory=list[str])
    """Keys added or changed since the UI last looked (it clears this)."""
    removed: list[str] = field(default_factory=list[str])
    execution_id: str = ""
    title: str = ""
    role: str = ""
    """``driver`` or ``observer`` once bound."""
    turn: str = ""
    """The last ``_agent_channel/turn_state``: started, ended, cancelled (or idle)."""
    queue: list[Queued] = field(default_factory=list[Queued])
    approval: Approval | None = None
    """The permission request waiting for this client: ``toolCall`` and ``options``."""
    question: Form | None = None
    """The model's question waiting for this client's answer (``elicitation/create``)."""
    ended: JsonObject | None = None
    """``_agent_channel/session_ended`` params once the execution is over."""
    connection: str = "connecting"
    targets: list[JsonValue] = field(default_factory=list["JsonValue"])
    """The picker's targets, when the server asked us to choose."""
    children: list[JsonObject] = field(default_factory=list["JsonObject"])
    """The execution's children in tree order (``_agent_channel/children``, K11)."""
    _counter: int = 0
    _vanished: set[str] = field(default_factory=set[str])
    withdrawing: set[str] = field(default_factory=set[str])
    """Ids this console asked to withdraw (the answer, not the queue, settles them)."""
    _left: OrderedDict[str, str] = field(default_factory=OrderedDict[str, str])
    """Our message ids that left the queue (``read`` or ``withdrawn``), newest last, at
    most :data:`MAX_LEFT`: an id the prompt response brings late is settled from here."""

    # -- the indicator ---------------------------------------------------------------

    @property
    def status(self) -> str:
        """The execution's status in the words ``ls`` uses: running, waiting for operator,
        finished or failed. Between turns the console infers "waiting for operator" (the
        wire says when a turn ends, not when the agent starts waiting; A11 after a cancel)."""
        if self.ended is not None:
            return "failed" if self.ended.get("error") else "finished"
        if self.turn == "started":
            return "running"
        return "waiting for operator"

    @property
    def activity(self) -> str:
        """The header's words: the status and the turn state, as ``ls`` says them (or the
        connection's state while not connected)."""
        if self.connection != "connected":
            return self.connection
        turn = f"turn {self.turn or 'idle'}"
        if self.ended is None and self.question is not None:
            turn = "question pending"
        elif self.ended is None and self.approval is not None:
            turn = "approval pending"
        elif self.ended is None and self.turn == "cancelled":
            turn += ": send a redirect"
        return f"{self.status} · {turn}"

    def running_tools(self) -> list[Entry]:
        return [e for e in self.entries.values() if e.kind == "tool" and e.status == "in_progress"]

    def mine_queued(self) -> list[Queued]:
        return [q for q in self.queue if q.mine]

    # -- what the console does itself ------------------------------------------------

    def reset(self) -> None:
        """A new bind: the replay brings the conversation again."""
        self.removed.extend(self.entries)
        self.entries.clear()
        self.changed.clear()
        self.queue = []
        self.children = []
        self.approval = None
        self.question = None
        self.ended = None
        self.turn = ""
        self.role = ""
        self._vanished.clear()
        self._left.clear()

    def note(self, text: str) -> Entry:
        self._counter += 1
        return self._put(Entry(f"note:{self._counter}", "note", text))

    def queued(self, text: str) -> Entry:
        """Our message, shown at once until its echo replaces it (or it is withdrawn)."""
        self._counter += 1
        return self._put(Entry(f"queued:{self._counter}", "queued", text))

    def sent(self, entry: Entry, message_id: str) -> None:
        """The server queued our message under ``message_id`` (the prompt response)."""
        entry.message_id = message_id
        how = self._left.get(message_id)
        if how is not None and entry.key in self.entries:  # the queue moved on already
            self.drop(entry.key)
            if how == "withdrawn":
                self.note(f"withdrawn elsewhere: {_quote(entry.text)}")

    def not_withdrawn(self, message_id: str) -> None:
        """A withdraw came too late: if the message left the queue, the agent read it."""
        if message_id in self._vanished or message_id not in {q.id for q in self.queue}:
            self._vanished.discard(message_id)
            self._leave(message_id, "read")
            for entry in list(self.entries.values()):
                if entry.kind == "queued" and entry.message_id == message_id:
                    self.drop(entry.key)

    def drop(self, key: str) -> None:
        if self.entries.pop(key, None) is not None:
            self.removed.append(key)

    def withdrawn(self, message_id: str) -> None:
        """The server confirmed a withdraw: the local queued entry goes, a note says so."""
        self._leave(message_id, "withdrawn")
        for entry in list(self.entries.values()):
            if entry.kind == "queued" and entry.message_id == message_id:
                self.drop(entry.key)
                self.note(f"withdrawn before the agent read it: {_quote(entry.text)}")
                return
        self.note("withdrew a queued message")

    # -- the wire --------------------------------------------------------------------

    def update(self, update: JsonObject) -> None:
        """Fold one ``session/update`` payload."""
        kind = update.get("sessionUpdate")
        meta = _object(update.get("_meta") or {})
        self._settle_vanished(
            read=kind == "user_message_chunk" and meta.get(f"{META}source") == "operator"
        )
        if kind in ("agent_message_chunk", "agent_thought_chunk"):
            if f"{META}bound" in meta:
                bound = _object(meta[f"{META}bound"])
                self.execution_id = str(bound.get("executionId", self.execution_id))
                self.role = "driver" if bound.get("interactive") else "observer"
                self.targets = []
                return
            if f"{META}targets" in meta:
                targets = meta[f"{META}targets"]
                self.targets = list(targets) if isinstance(targets, list) else []
                return
            text = _text_of(update.get("content"))
            message_id = str(update.get("messageId") or "")
            if f"{META}modelCall" in meta:  # A9: that call was cut short, its text dropped
                for which in ("agent", "reasoning"):
                    entry = self.entries.get(f"msg:{message_id}:{which}")
                    if entry is not None:
                        entry.interrupted = True
                        self.changed.append(entry.key)
                return
            which = "agent" if kind == "agent_message_chunk" else "reasoning"
            self._append(f"msg:{message_id}:{which}", which, text)
        elif kind == "user_message_chunk":
            role = meta.get(f"{META}role", "user")
            source = meta.get(f"{META}source")
            which = "system" if role == "system" else "operator" if source == "operator" else "user"
            text = _text_of(update.get("content"))
            self._append(f"msg:{update.get('messageId') or ''}:{which}", which, text)
        elif kind == "tool_call":
            entry = self._tool(str(update.get("toolCallId")))
            entry.title = str(update.get("title") or entry.title)
            entry.tool_kind = str(update.get("kind") or entry.tool_kind)
            entry.status = str(update.get("status") or "pending")
            entry.args = update.get("rawInput", entry.args)
            self._tool_content(entry, update)
        elif kind == "tool_call_update":
            entry = self._tool(str(update.get("toolCallId")))
            if update.get("title"):
                entry.title = str(update["title"])
            if update.get("status"):
                entry.status = str(update["status"])
            if "rawInput" in update:
                entry.args = update["rawInput"]
            self._tool_content(entry, update)
        elif kind == "session_info_update" and update.get("title"):
            self.title = str(update["title"])

    def notification(self, method: str, params: JsonObject) -> None:
        """Fold one of our ``_agent_channel/*`` notifications."""
        name = method.lstrip("_").removeprefix("agent_channel/")
        if name == "turn_state":
            self.turn = str(params.get("state", ""))
            if self.turn == "cancelled":
                for entry in self.entries.values():
                    if entry.kind == "tool" and entry.status in ("in_progress", "pending"):
                        entry.status = "cancelled"
                        self.changed.append(entry.key)
        elif name == "queue":
            self._queue(params.get("messages") or [])
        elif name == "children":
            rows = params.get("children")
            self.children = (
                [r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []
            )
        elif name == "session_ended":
            self.ended = dict(params)
            self.turn = self.turn or "ended"
            self.approval = None
            self.question = None
            for entry in list(self.entries.values()):
                if entry.kind == "queued":
                    self.drop(entry.key)
            self.queue = []
            self.note(ended_text(params))
        elif name == "dropped":
            self.note(f"the server dropped this client: {params.get('reason', '')}")

    # -- plumbing --------------------------------------------------------------------

    def _put(self, entry: Entry) -> Entry:
        self.entries[entry.key] = entry
        self.changed.append(entry.key)
        while len(self.entries) > MAX_ENTRIES:
            old, _ = self.entries.popitem(last=False)
            self.removed.append(old)
        return entry

    def _append(self, key: str, kind: str, text: str) -> None:
        entry = self.entries.get(key)
        if entry is None:
            entry = self._put(Entry(key, kind))
        entry.add_text(text)
        self.changed.append(key)

    def _tool(self, tool_call_id: str) -> Entry:
        key = f"tool:{tool_call_id}"
        entry = self.entries.get(key)
        if entry is None:
            entry = self._put(Entry(key, "tool", title=tool_call_id, status="pending"))
        self.changed.append(key)
        return entry

    def _tool_content(self, entry: Entry, update: JsonObject) -> None:
        content = update.get("content")
        if isinstance(content, list) and content:
            entry.result = " ".join(_text_of(c) for c in content).strip()
        elif "rawOutput" in update and update["rawOutput"] is not None:
            entry.result = compact(update["rawOutput"])
        if entry.status == "failed" and "cancel" in entry.result.lower():
            entry.status = "cancelled"  # ACP has no cancelled status: the result says it

    def _queue(self, messages: JsonValue) -> None:
        before = {q.id for q in self.queue if q.mine}
        mine_prefix = f"{self.client_name}-"
        self.queue = [
            Queued(
                str(q.get("id", "")),
                str(q.get("text", "")),
                str(q.get("client", "")),
                str(q.get("client", "")).startswith(mine_prefix),
            )
            for q in (messages if isinstance(messages, list) else [])
            if isinstance(q, dict)
        ]
        now = {q.id for q in self.queue if q.mine}
        self._vanished |= before - now

    def _leave(self, message_id: str, how: str) -> None:
        self._left[message_id] = how
        while len(self._left) > MAX_LEFT:
            self._left.popitem(last=False)

    def _settle_vanished(self, *, read: bool) -> None:
        """Our queued messages that left the queue: folded in (the operator echo follows at
        once) or withdrawn by someone else (anything else follows). Matched by id, never by
        text: two identical messages are two entries."""
        gone = self._vanished - self.withdrawing
        self._vanished &= self.withdrawing  # settled by the withdraw's answer
        if not gone:
            return
        how = "read" if read else "withdrawn"
        for message_id in gone:
            self._leave(message_id, how)
        for entry in list(self.entries.values()):
            if entry.kind == "queued" and entry.message_id in gone:
                self.drop(entry.key)  # the echo shows it now, or a note says where it went
                if how == "withdrawn":
                    self.note(f"withdrawn elsewhere: {_quote(entry.text)}")


def ended_text(params: JsonObject) -> str:
    """The plain message at the end of an execution, with what never reached the agent."""
    if params.get("error"):
        text = f"The execution failed: {str(params['error']).rstrip('.')}."
    else:
        text = f"The execution has ended ({params.get('stopReason') or 'finished'})."
    listed = params.get("undelivered") or []
    undelivered = [u for u in listed if isinstance(u, dict)] if isinstance(listed, list) else []
    if undelivered:
        text += f" {len(undelivered)} message(s) were never read by the agent:"
        for u in undelivered:
            text += f"\n  - {str(u.get('text', '')).strip()}"
    else:
        text += " Nothing you sent was left unread."
    return text
