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
    "run_store_checks",
]
