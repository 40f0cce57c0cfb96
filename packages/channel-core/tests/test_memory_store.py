"""The reference store passes the store conformance suite, and is bounded as stated."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from agent_channel import UserMessage
from agent_channel.testing import (
    STORE_CHECKS,
    ConformanceError,
    MemoryStore,
    StoreCheck,
    StoreOpener,
    run_store_checks,
)


def _location(new: Callable[[], MemoryStore] = MemoryStore) -> StoreOpener:
    """One location: the first call opens ``new()``, each later one reopens the last."""
    current: list[MemoryStore] = []

    def opener() -> MemoryStore:
        store = current[-1].reopen() if current else new()
        current.append(store)
        return store

    return opener


@pytest.mark.parametrize("check", STORE_CHECKS.values(), ids=list(STORE_CHECKS))
def test_memory_store_conformance(check: StoreCheck) -> None:
    check(_location())


def test_the_suite_runs_without_a_test_framework_and_reports_a_broken_store() -> None:
    assert run_store_checks(_location) == dict.fromkeys(STORE_CHECKS)

    class Forgetful(MemoryStore):
        """Forgets the state it is given: a store that breaks one promise."""

        def reopen(self) -> MemoryStore:
            store = super().reopen()
            for execution in store._data.values():  # pyright: ignore[reportPrivateUsage]
                execution.state = None
            return store

    def forgetful() -> StoreOpener:
        return _location(Forgetful)

    results = run_store_checks(forgetful)
    assert results["state_none_keeps_the_stored_state"] is not None
    assert "state" in (results["state_none_keeps_the_stored_state"] or "")
    with pytest.raises(ConformanceError):
        STORE_CHECKS["state_none_keeps_the_stored_state"](forgetful())


def test_finished_executions_are_pruned_past_the_policy() -> None:
    store = MemoryStore(keep=2)
    for name in ("a", "b", "c", "d"):
        store.journal(name).finish("ended", None, None)
    store.journal("running").posted(UserMessage("hi"))
    assert {e.id for e in store.executions()} == {"c", "d", "running"}
    aged = MemoryStore(keep_seconds=-1.0)  # every finished one is past its age
    aged.journal("old").finish("ended", None, None)
    assert [e.id for e in aged.executions()] == []


def test_a_journal_of_a_closed_store_fails_once_and_goes_on() -> None:
    store = MemoryStore()
    journal = store.journal("e1")
    told: list[str] = []
    journal.on_failure = told.append
    store.close()
    journal.posted(UserMessage("after the close"))
    journal.commit((), (), {"turns": 1}, start=0)
    assert journal.failure is not None and "closed" in journal.failure
    assert told == [journal.failure]
