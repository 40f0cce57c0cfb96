"""The store conformance suite: what every :class:`~agent_channel.Store` must do, as checks.

One check per promise of the ``Store`` and ``Journal`` docstrings. A check is a plain
function taking an *opener* (a callable that opens the store at one location: the first
call creates it, a call after ``close()`` opens it again as a restarted process would)
and raising :class:`ConformanceError` when the store breaks the promise. Plain functions,
so the suite needs no test framework (the core's wheel has none): a pytest suite
parametrises one test over :data:`STORE_CHECKS`; anything else calls
:func:`run_store_checks`. A store's failure behaviour (a full disk, a damaged file)
cannot be provoked through the protocol: each store's own tests cover it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Mapping, Sequence
from contextlib import contextmanager

from .._items import ChannelItem, UserMessage
from .._messages import ChatMessage, ChatMessageAssistant, ChatMessageUser
from .._store import Journal, Restored, Store, StoreError

StoreOpener = Callable[[], Store]
"""Opens the store at one location: a new one at the first call; after ``close()``, the
same location again (what a restarted process finds)."""

StoreCheck = Callable[[StoreOpener], None]
"""One check of the suite: raises :class:`ConformanceError` if the store fails it."""


class ConformanceError(AssertionError):
    """A store broke a promise of the protocols; the message says which and how."""


def _post(journal: Journal, item: ChannelItem) -> None:
    """What a channel does: the write, then the wait it returns (a durable store's)."""
    settle = journal.posted(item)
    if settle is not None:
        settle()


def _expect(ok: bool, what: str, *seen: object) -> None:
    if not ok:
        detail = "; saw " + ", ".join(repr(s) for s in seen) if seen else ""
        raise ConformanceError(what + detail)


@contextmanager
def _opened(opener: StoreOpener) -> Generator[Store]:
    store = opener()
    try:
        yield store
    finally:
        store.close()


def _json(messages: Sequence[ChatMessage]) -> list[str]:
    return [m.model_dump_json() for m in messages]


def _conversation(n: int, start: int = 0) -> list[ChatMessage]:
    out: list[ChatMessage] = []
    for i in range(start, start + n):
        kind = ChatMessageUser if i % 2 == 0 else ChatMessageAssistant
        out.append(kind(content=f"message {i}"))
    return out


def _later() -> None:
    """Return once ``time.time()`` moved on, so the next write is strictly newer."""
    now = time.time()
    while time.time() == now:
        pass


def _restored_again(opener: StoreOpener, execution_id: str = "e1", wait: bool = False) -> Restored:
    """What a journal of ``execution_id`` has once the store is opened again, then closed."""
    with _opened(opener) as store:
        restored = store.journal(execution_id, wait=wait).restored()
    _expect(restored is not None, "a running execution opened again has restored()")
    assert restored is not None
    return restored


def _refused(store: Store, execution_id: str) -> bool:
    try:
        store.journal(execution_id)
    except StoreError:
        return True
    return False


# -- new and restored journals ------------------------------------------------------------


def check_a_new_execution_has_no_restored_state(opener: StoreOpener) -> None:
    with _opened(opener) as store:
        journal = store.journal("e1", {"title": "one"})
        _expect(journal.id == "e1", "the journal's id is the execution's", journal.id)
        _expect(journal.restored() is None, "a new execution's restored() is None")
        _expect(journal.failure is None, "a journal that wrote nothing has no failure")
        row = store.get("e1")
        _expect(row is not None, "get() finds an execution once its journal is opened")
        assert row is not None
        _expect(row.status == "running", "a new execution is running", row.status)
        _expect(dict(row.meta) == {"title": "one"}, "the meta given is stored", row.meta)
        _expect(row.restored is None, "a new execution was never restored", row.restored)
        _expect(row.messages == 0, "a new execution has no messages", row.messages)


def check_a_running_execution_is_restored_after_reopening(opener: StoreOpener) -> None:
    first, second = UserMessage("first"), UserMessage("second")
    conversation = _conversation(2)
    sections = {"children": "[]", "notes": '{ "kept" : "as written" }'}
    with _opened(opener) as store:
        journal = store.journal("e1", {"title": "one"})
        _post(journal, first)
        _post(journal, second)
        journal.commit(conversation, (), {"turns": 1}, start=0, sections=sections)
    with _opened(opener) as store:
        restored = store.journal("e1").restored()
        _expect(restored is not None, "a running execution opened again has restored()")
        assert restored is not None
        _expect(
            _json(restored.messages) == _json(conversation),
            "restored.messages is the conversation last committed",
            restored.messages,
        )
        _expect(restored.state == {"turns": 1}, "restored.state is the state last committed")
        _expect(
            [i.model_dump_json() for i in restored.pending]
            == [first.model_dump_json(), second.model_dump_json()],
            "restored.pending holds the items posted and not taken, in post order",
            restored.pending,
        )
        _expect(
            dict(restored.sections) == sections,
            "restored.sections hands back each section's text exactly as committed",
            restored.sections,
        )
        _expect(restored.wait is False, "restored.wait is False unless asked for")
        row = store.get("e1")
        _expect(row is not None and row.restored is not None, "get() says when it was restored")
        _expect(store.journal("e2").restored() is None, "a new execution is still new", "e2")


def check_restored_wait_is_handed_back(opener: StoreOpener) -> None:
    with _opened(opener) as store:
        store.journal("e1")
    _expect(_restored_again(opener, wait=True).wait, "journal(wait=True) sets restored.wait")


def check_meta_is_replaced_only_when_given(opener: StoreOpener) -> None:
    with _opened(opener) as store:
        store.journal("e1", {"v": 1})
    with _opened(opener) as store:
        store.journal("e1")
        row = store.get("e1")
        _expect(row is not None and dict(row.meta) == {"v": 1}, "no meta keeps the stored one")
    with _opened(opener) as store:
        store.journal("e1", {"v": 2})
        row = store.get("e1")
        _expect(row is not None and dict(row.meta) == {"v": 2}, "a meta given replaces it")


# -- write-ahead ----------------------------------------------------------------------------


def check_a_withdrawn_item_is_not_restored(opener: StoreOpener) -> None:
    kept, withdrawn = UserMessage("kept"), UserMessage("withdrawn")
    with _opened(opener) as store:
        journal = store.journal("e1")
        _post(journal, kept)
        _post(journal, withdrawn)
        journal.withdrawn(withdrawn.id)
    ids = [i.id for i in _restored_again(opener).pending]
    _expect(ids == [kept.id], "a withdrawn item is no longer pending", ids)


def check_taken_items_are_no_longer_pending(opener: StoreOpener) -> None:
    taken, left = UserMessage("taken"), UserMessage("left")
    with _opened(opener) as store:
        journal = store.journal("e1")
        _post(journal, taken)
        _post(journal, left)
        journal.commit(_conversation(1), (taken.id,), None, start=0)
    ids = [i.id for i in _restored_again(opener).pending]
    _expect(ids == [left.id], "commit(taken=...) removes those items from pending", ids)


# -- the boundary's commit ------------------------------------------------------------------


def check_commit_from_zero_rewrites_the_conversation(opener: StoreOpener) -> None:
    with _opened(opener) as store:
        journal = store.journal("e1")
        journal.commit(_conversation(3), (), None, start=0)
        fresh = _conversation(1, start=10)
        journal.commit(fresh, (), None, start=0)
        _expect(
            _json(store.messages("e1")) == _json(fresh),
            "commit(start=0) replaces the conversation",
            store.messages("e1"),
        )
        row = store.get("e1")
        _expect(row is not None and row.messages == 1, "get().messages counts it", row)


def check_commit_from_n_appends(opener: StoreOpener) -> None:
    whole = _conversation(5)
    with _opened(opener) as store:
        journal = store.journal("e1")
        journal.commit(whole[:2], (), None, start=0)
        journal.commit(whole[2:], (), None, start=2)
        _expect(
            _json(store.messages("e1")) == _json(whole),
            "commit(start=n) appends from index n",
            store.messages("e1"),
        )
        row = store.get("e1")
        _expect(row is not None and row.messages == 5, "get().messages counts them all", row)
    with _opened(opener) as store:
        _expect(
            _json(store.messages("e1")) == _json(whole),
            "messages() reads the stored conversation after reopening",
        )
        restored = store.journal("e1").restored()
        assert restored is not None
        _expect(_json(restored.messages) == _json(whole), "and restored.messages is it")


def check_state_none_keeps_the_stored_state(opener: StoreOpener) -> None:
    with _opened(opener) as store:
        journal = store.journal("e1")
        journal.commit((), (), {"turns": 1}, start=0)
        journal.commit((), (), None, start=0)
    with _opened(opener) as store:
        journal = store.journal("e1")
        restored = journal.restored()
        assert restored is not None
        _expect(restored.state == {"turns": 1}, "state=None keeps the stored state", restored)
        journal.commit((), (), {"turns": 2}, start=0)
    state = _restored_again(opener).state
    _expect(state == {"turns": 2}, "a state given replaces it", state)


def check_sections_not_given_keep_their_text(opener: StoreOpener) -> None:
    with _opened(opener) as store:
        journal = store.journal("e1")
        journal.commit((), (), None, start=0, sections={"children": "[1]", "notes": '"a"'})
        journal.commit((), (), None, start=0)  # none given: both kept
        journal.commit((), (), None, start=0, sections={"notes": '"b"'})  # one given
    sections = dict(_restored_again(opener).sections)
    _expect(
        sections == {"children": "[1]", "notes": '"b"'},
        "a section not given keeps its stored text; one given replaces it",
        sections,
    )


# -- the end --------------------------------------------------------------------------------


def check_a_finished_execution_is_never_restored(opener: StoreOpener) -> None:
    with _opened(opener) as store:
        journal = store.journal("e1")
        _post(journal, UserMessage("never read"))
        journal.finish("ended", "end_turn", None)
        store.journal("e2").finish("ended", "error", "it broke")
        row = store.get("e1")
        _expect(row is not None and row.status == "ended", "finish() records the status", row)
        assert row is not None
        _expect(row.stop_reason == "end_turn" and row.error is None, "and the reason", row)
        failed = store.get("e2")
        _expect(failed is not None and failed.error == "it broke", "and the error", failed)
        _expect(_refused(store, "e1"), "journal() of a finished execution raises StoreError")
    with _opened(opener) as store:
        _expect(_refused(store, "e1"), "after reopening too")
        listed = [e.id for e in store.executions("running")]
        _expect("e1" not in listed, "a finished execution is not listed as running", listed)


def check_a_closed_execution_is_listed_and_never_restored(opener: StoreOpener) -> None:
    with _opened(opener) as store:
        store.journal("e1", {"title": "one"})
        store.close_execution("e1")
        row = store.get("e1")
        _expect(row is not None and row.status == "closed", "close_execution() closes it", row)
        _expect(_refused(store, "e1"), "journal() of a closed execution raises StoreError")
    with _opened(opener) as store:
        _expect([e.id for e in store.executions("closed")] == ["e1"], "it stays listed")
        _expect(_refused(store, "e1"), "and is never restored")


# -- listing --------------------------------------------------------------------------------


def check_executions_are_newest_first_and_filtered(opener: StoreOpener) -> None:
    with _opened(opener) as store:
        journals: dict[str, Journal] = {}
        for name in ("a", "b", "c"):
            journals[name] = store.journal(name)
            _later()
        journals["a"].commit(_conversation(1), (), None, start=0)  # a wrote last
        _later()
        store.close_execution("b")  # then b
        listed = [e.id for e in store.executions()]
        _expect(listed == ["b", "a", "c"], "executions() lists the last written first", listed)
        updated = [e.updated for e in store.executions()]
        _expect(updated == sorted(updated, reverse=True), "by `updated`, newest first", updated)
        running = [e.id for e in store.executions("running")]
        _expect(running == ["a", "c"], "executions(status) lists only those", running)
        _expect(store.get("nobody") is None, "get() of an unknown id is None")
        row = store.get("a")
        _expect(row is not None and row.created <= row.updated, "created <= updated", row)


STORE_CHECKS: Mapping[str, StoreCheck] = {
    check.__name__.removeprefix("check_"): check
    for check in (
        check_a_new_execution_has_no_restored_state,
        check_a_running_execution_is_restored_after_reopening,
        check_restored_wait_is_handed_back,
        check_meta_is_replaced_only_when_given,
        check_a_withdrawn_item_is_not_restored,
        check_taken_items_are_no_longer_pending,
        check_commit_from_zero_rewrites_the_conversation,
        check_commit_from_n_appends,
        check_state_none_keeps_the_stored_state,
        check_sections_not_given_keep_their_text,
        check_a_finished_execution_is_never_restored,
        check_a_closed_execution_is_listed_and_never_restored,
        check_executions_are_newest_first_and_filtered,
    )
}
"""Every check, by name: parametrise a test over it, with a fresh location per check."""


def run_store_checks(new_location: Callable[[], StoreOpener]) -> dict[str, str | None]:
    """Run every check, each on a fresh location (``new_location()`` gives its opener).

    Returns each check's name with ``None`` (passed) or what went wrong; without a test
    framework, this is the suite.
    """
    results: dict[str, str | None] = {}
    for name, check in STORE_CHECKS.items():
        try:
            check(new_location())
        except ConformanceError as e:
            results[name] = str(e)
        else:
            results[name] = None
    return results
