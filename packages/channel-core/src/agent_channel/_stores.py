"""Opening a store by what a person types: a path, or a URL whose scheme names the store.

Each store is a distribution of its own; the core imports none of them. A store declares
an opener in the ``agent_channel.stores`` entry-point group under its URL scheme
(``postgresql = "agent_channel_postgres:open_store"``); the opener takes the spec as typed
plus keyword options and returns a :class:`~agent_channel.Store`. A spec without a scheme
is a file path, for the SQLite store, so ``--store ./runs.db`` means what it always did.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any, cast

from ._store import Store, StoreError

GROUP = "agent_channel.stores"
"""The entry-point group stores register their opener in, named by URL scheme."""

FILE = "sqlite"
"""The store a path (no scheme) and no spec at all open."""

_INSTALL = {  # spelled out: tests/test_install_hints.py checks each command
    "sqlite": "agent-channel-sqlite (`pip install ./packages/channel-core ./packages/store-sqlite`"
    " at the root of a clone; once published, `pip install agent-channel-sqlite`)",
}


def scheme_of(spec: str | os.PathLike[str] | None) -> str:
    """The store a spec names: its URL scheme, or :data:`FILE` for a path or ``None``."""
    if spec is None or not isinstance(spec, str):
        return FILE
    scheme, sep, _ = spec.partition("://")
    return scheme.lower() if sep and scheme.isidentifier() else FILE


def open_store(spec: str | os.PathLike[str] | None = None, **options: Any) -> Store:
    """Open (or create) the store ``spec`` names, with the installed store of its kind.

    ``None`` is the SQLite store at its default path; a path is a SQLite file;
    ``scheme://…`` goes to the store registered for ``scheme`` (``postgresql://…``).
    ``options`` go to that store's opener (``durable=True`` for SQLite). Raises
    :class:`StoreError` with one line: no store installed for the scheme (and what to
    install), or the store's own refusal.
    """
    scheme = scheme_of(spec)
    found = [ep for ep in entry_points(group=GROUP) if ep.name == scheme]
    if not found:
        hint = f"; install {_INSTALL[scheme]}" if scheme in _INSTALL else ""
        have = sorted({ep.name for ep in entry_points(group=GROUP)})
        installed = f" (installed: {', '.join(have)})" if have else ""
        raise StoreError(f"no store for {scheme}:// is installed{installed}{hint}")
    opener = cast("Callable[..., Store]", found[0].load())
    return opener(spec, **options)
