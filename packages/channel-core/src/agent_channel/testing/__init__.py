"""agent_channel.testing: what a test, or another store, builds on.

:class:`MemoryStore` is the reference :class:`~agent_channel.Store`: an execution made
durable in memory, for tests that need no database. The store conformance suite
(:data:`STORE_CHECKS`, :func:`run_store_checks`) is every promise of the ``Store`` and
``Journal`` protocols as a check; a store runs it against itself::

    import pytest
    from agent_channel.testing import STORE_CHECKS, StoreCheck

    @pytest.mark.parametrize("check", STORE_CHECKS.values(), ids=list(STORE_CHECKS))
    def test_conformance(check: StoreCheck, tmp_path) -> None:
        check(lambda: MyStore(tmp_path / "store"))  # each call opens the same location

:func:`run_crash_check` is the promise a process's death tests (D2): a process posting and
checkpointing through the store is SIGKILLed again and again, and every acknowledged post
must come back once, in order; a store runs it with a spec :func:`agent_channel.open_store`
opens (``run_crash_check(str(tmp_path / "s.db"))``, ``run_crash_check(url)``).

Nothing here imports a test framework: plain functions raising :class:`ConformanceError`.
"""

from __future__ import annotations

from ._conformance import (
    STORE_CHECKS,
    ConformanceError,
    StoreCheck,
    StoreOpener,
    run_store_checks,
)
from ._crash import run_crash_check
from ._memory import KEEP_FINISHED, KEEP_SECONDS, MemoryJournal, MemoryStore

__all__ = [
    "KEEP_FINISHED",
    "KEEP_SECONDS",
    "STORE_CHECKS",
    "ConformanceError",
    "MemoryJournal",
    "MemoryStore",
    "StoreCheck",
    "StoreOpener",
    "run_crash_check",
    "run_store_checks",
]
