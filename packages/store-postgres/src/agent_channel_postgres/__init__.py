"""agent_channel_postgres: a store of agent-channel in a PostgreSQL database.

``open_store(url)`` opens a :class:`PostgresStore`, an :class:`agent_channel.Store` that
many processes, on many hosts, share: an execution whose process or node died is restored
by another one under its id. Each execution is held by one live process at a time; an
acknowledged post is committed on the server before ``post`` returns, and no post waits
for the database while its channel's lock is held (``docs/postgres.md``).
``agent-channel-acp serve --store postgresql://…`` opens it through the entry point group
``agent_channel.stores``. :mod:`agent_channel_postgres.testing` starts a throwaway server.
"""

from __future__ import annotations

from ._db import MAX_PENDING
from ._store import (
    KEEP_FINISHED,
    KEEP_SECONDS,
    SCHEMA,
    TAKEOVER_SECONDS,
    PostgresJournal,
    PostgresStore,
    describe,
    open_store,
)

__version__ = "0.1.0"

__all__ = [
    "KEEP_FINISHED",
    "KEEP_SECONDS",
    "MAX_PENDING",
    "SCHEMA",
    "TAKEOVER_SECONDS",
    "PostgresJournal",
    "PostgresStore",
    "describe",
    "open_store",
]
