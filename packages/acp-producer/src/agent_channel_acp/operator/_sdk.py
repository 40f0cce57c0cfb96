"""The console's connection to a running ``serve``: the SDK's client side, initialized.

Imported only where the SDK is wanted (the console, the tour); the verbs stay on
:mod:`._connect`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..wire._discovery import Record
from ._connect import EXT, ask, executions_of, initialize_meta, open_stream

if TYPE_CHECKING:
    from acp.client.connection import ClientSideConnection

    from ..wire._frames import Execution


class _Quiet:
    """The console's default ACP client: ignores the stream, never answers a permission
    request (it waits until we leave, and the server asks another driver)."""

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        return None

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        await asyncio.Event().wait()

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        from acp import RequestError

        raise RequestError.method_not_found(f"_{method}")


@dataclass
class Linked:
    """A connected, initialized server over the SDK's client side (the console's)."""

    record: Record
    conn: ClientSideConnection
    executions: list[Execution]


@asynccontextmanager
async def connected(
    record: Record,
    client: Any = None,
    *,
    name: str | None = None,
    reader: asyncio.StreamReader | None = None,
    forms: bool = False,
) -> AsyncGenerator[Linked, None]:
    """An initialized SDK connection to ``record``'s server and its listing. ``client``
    handles what the server sends (default: a quiet one), ``name`` goes in ``clientInfo``,
    ``reader`` as for :func:`open_stream`; ``forms``: advertise form elicitation (the
    client answers ``elicitation/create``, which the SDK counts as unstable protocol)."""
    from acp.client.connection import ClientSideConnection
    from acp.schema import (
        ClientCapabilities,
        ElicitationCapabilities,
        ElicitationFormCapabilities,
        Implementation,
    )

    reader, writer = await open_stream(record, reader)
    conn = ClientSideConnection(
        client or _Quiet(),  # pyright: ignore[reportArgumentType]
        writer,
        reader,
        use_unstable_protocol=forms,
    )
    info = Implementation(name=name, version="1") if name else None
    caps = (
        ClientCapabilities(elicitation=ElicitationCapabilities(form=ElicitationFormCapabilities()))
        if forms
        else None
    )
    try:
        meta: dict[str, Any] = initialize_meta(record)  # the SDK's **kwargs are ``_meta``
        await ask(
            conn.initialize(protocol_version=1, client_info=info, client_capabilities=caps, **meta)
        )
        listed = await ask(conn.ext_method(EXT + "list", {}))
        yield Linked(record, conn, executions_of(listed))
    finally:
        await conn.close()
        writer.close()
