"""``session/list`` (D5): every session a server can give a client, wherever it comes from.

Exists so both modes list alike and so "where sessions come from" is one small protocol:
a :class:`Source` yields :class:`Listed` rows. Today the sources are the live executions
(stdio's sessions, attach's hubs, each made a row by :func:`from_hub`); a store of past
executions is one more source, passed after the live ones (a row whose id an earlier source
listed is skipped, so a restored execution shows once, live). :func:`answer` filters by
``cwd``, orders the rows newest first (by start time, then id) and returns one page of
:data:`PAGE_SIZE` rows with an opaque cursor for the next one.

The cursor is a position, not an offset: the start time and id of the last row given
(and the ``cwd`` filter it was given under), so a session that starts or goes between two
pages neither repeats a row nor skips one that was there all along.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal, Protocol

from acp.schema import ListSessionsResponse, SessionInfo
from agent_channel import ChatMessage, ChatMessageUser, Store

from ..stream._hub import Hub
from ..stream._items import META
from ..wire._errors import WireError
from ._handler import sdk_error

PAGE_SIZE = 50
"""Sessions in one ``session/list`` page; ``nextCursor`` is there when more follow."""
TITLE_MAX = 80
"""Characters of a title made from a message (cut with an ellipsis)."""

_CURSOR_VERSION = 1


@dataclass(frozen=True, slots=True)
class Listed:
    """One session as ``session/list`` shows it (a live execution's, or a stored row)."""

    session_id: str
    cwd: str
    started: float
    """When it started (``time.time()``): the list's order and the cursor's key."""
    title: str | None = None
    updated: float | None = None
    """Its last activity (``time.time()``), shown as ``updatedAt``."""
    status: Literal["running", "ended"] = "running"
    meta: Mapping[str, object] = field(default_factory=dict[str, object])
    """More of our ``_meta`` (keys already prefixed ``agent_channel.``)."""

    def info(self) -> SessionInfo:
        meta: dict[str, object] = {
            f"{META}status": self.status,
            f"{META}started": _iso(self.started),
            **self.meta,
        }
        return SessionInfo(
            session_id=self.session_id,
            cwd=self.cwd,
            title=self.title,
            updated_at=None if self.updated is None else _iso(self.updated),
            field_meta=meta,
        )


class Source(Protocol):
    """Where sessions come from: the live executions, a store of past ones."""

    def listed(self) -> Iterable[Listed]:
        """Every session this source can give a client, in any order."""
        ...


def from_hub(hub: Hub, cwd: str) -> Listed:
    """A live execution's row: its name as the title (else its first operator message)."""
    return Listed(
        session_id=hub.id,
        cwd=cwd,
        started=hub.created,
        title=hub.title or title_from(hub.messages()),
        updated=hub.updated,
        status="running" if hub.running else "ended",
        meta={f"{META}turnState": hub.turn_state, f"{META}execution": hub.status},
    )


class Stored:
    """A store's unfinished executions of one mode as rows (D5): after a restart, the ones
    a client can pick up again (``session/load``, ``session/resume``) though none runs yet."""

    def __init__(self, store: Store, mode: str) -> None:
        self._store = store
        self._mode = mode

    def listed(self) -> Iterable[Listed]:
        for e in self._store.executions("running"):
            meta = e.meta
            if meta.get("mode") != self._mode:
                continue
            title = meta.get("title")
            cwd = meta.get("cwd")
            yield Listed(
                session_id=e.id,
                cwd=cwd if isinstance(cwd, str) else "/",
                started=e.created,
                title=title if isinstance(title, str) else title_from(self._store.messages(e.id)),
                updated=e.updated,
                meta={f"{META}execution": "stored"},
            )


def title_from(messages: Sequence[ChatMessage]) -> str | None:
    """A readable title: the first operator message, else the first user message (a task),
    on one line and cut to :data:`TITLE_MAX` characters; None before there is one."""
    users = [m for m in messages if isinstance(m, ChatMessageUser) and m.text.strip()]
    first = next((m for m in users if m.source == "operator"), users[0] if users else None)
    if first is None:
        return None
    text = " ".join(first.text.split())
    return text if len(text) <= TITLE_MAX else text[: TITLE_MAX - 1] + "…"


def answer(
    sources: Iterable[Source],
    *,
    cwd: str | None,
    cursor: str | None,
    size: int = PAGE_SIZE,
) -> ListSessionsResponse:
    """One page of ``session/list``: the sources' rows (the first source's row for an id
    listed twice), those under ``cwd`` when given, newest first, after ``cursor``.
    -32602 for a relative ``cwd`` or a cursor this function did not make."""
    if cwd is not None and not os.path.isabs(cwd):
        raise sdk_error(WireError.invalid_params(f"cwd must be an absolute path, not {cwd!r}"))
    wanted = None if cwd is None else os.path.normpath(cwd)
    after = None if cursor is None else _read_cursor(cursor, wanted)
    rows: dict[str, Listed] = {}
    for source in sources:
        for row in source.listed():
            if row.session_id not in rows:
                rows[row.session_id] = row
    picked = [
        r
        for r in rows.values()
        if (wanted is None or os.path.normpath(r.cwd) == wanted)
        and (after is None or _key(r) > after)
    ]
    picked.sort(key=_key)
    page = picked[:size]
    more = len(picked) > size
    return ListSessionsResponse(
        sessions=[r.info() for r in page],
        next_cursor=_make_cursor(page[-1], wanted) if more else None,
    )


# -- the cursor ------------------------------------------------------------------------


def _key(row: Listed) -> tuple[float, str]:
    return (-row.started, row.session_id)  # newest first; the id breaks ties


def _make_cursor(last: Listed, cwd: str | None) -> str:
    data = {"v": _CURSOR_VERSION, "t": last.started, "id": last.session_id, "cwd": cwd}
    raw = json.dumps(data, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _read_cursor(cursor: str, cwd: str | None) -> tuple[float, str]:
    """The position a cursor names; -32602 when it is not one :func:`_make_cursor` made,
    or was made under another ``cwd`` filter."""
    bad = WireError.invalid_params(
        "cursor is not one this agent gave: pass nextCursor back unchanged "
        "(and omit cursor for the first page)"
    )
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        data = json.loads(raw)
    except (ValueError, binascii.Error):
        raise sdk_error(bad) from None
    if not isinstance(data, dict):
        raise sdk_error(bad)
    fields: dict[str, object] = data  # pyright: ignore[reportUnknownVariableType]
    started, session_id = fields.get("t"), fields.get("id")
    if (
        fields.get("v") != _CURSOR_VERSION
        or not isinstance(started, int | float)
        or isinstance(started, bool)
        or not isinstance(session_id, str)
    ):
        raise sdk_error(bad)
    if fields.get("cwd") != cwd:
        raise sdk_error(
            WireError.invalid_params(
                "cursor was given for another cwd filter: ask again with the same cwd, "
                "or without cursor"
            )
        )
    return (-float(started), session_id)


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
