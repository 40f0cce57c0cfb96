"""agent_channel_sqlite: the embedded store of agent-channel, one SQLite file per machine.

``open_store(path)`` opens (or creates) a :class:`SqliteStore`, an
:class:`agent_channel.Store` through the standard library's ``sqlite3``: WAL, one live
process per file (``flock``), a schema version with a migration path from the first,
finished executions pruned by a stated policy, checkpoints of the log on a thread of their
own. ``durable=True`` makes every acknowledged post survive a power cut without making the
event loop wait for the disk (``docs/sqlite.md``).
"""

from __future__ import annotations

from ._store import (
    KEEP_FINISHED,
    KEEP_SECONDS,
    SCHEMA,
    SqliteJournal,
    SqliteStore,
    default_store_path,
    open_store,
)
from ._sync import SYNC_INTERVAL

__version__ = "0.1.0"

__all__ = [
    "KEEP_FINISHED",
    "KEEP_SECONDS",
    "SCHEMA",
    "SYNC_INTERVAL",
    "SqliteJournal",
    "SqliteStore",
    "default_store_path",
    "open_store",
]
