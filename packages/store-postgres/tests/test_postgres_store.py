"""The PostgreSQL store on a real server: D2 write-ahead (and never under the channel's
lock), N6 several processes sharing one database, D7 bounds and a lost connection, D8 bad
stores."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import anyio.to_thread
import psycopg
import pytest
from agent_channel import (
    Conversation,
    StoreBusy,
    StoreError,
    StoreFailed,
    UserMessage,
    fold,
    open_channel,
)
from agent_channel.testing import run_crash_check
from agent_channel_postgres import PostgresStore, open_store

PROGRAM = Path(__file__).with_name("store_program.py")
WAIT = 30.0
"""Seconds a test waits for something that happens at once (a guard against a hang)."""


def _sql(url: str, query: str, *params: object) -> list[tuple[object, ...]]:
    """``query`` on a connection of its own: what another process sees."""
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(query, params)  # pyright: ignore[reportArgumentType]
        return cur.fetchall() if cur.description else []


@contextmanager
def _items_locked(url: str) -> Iterator[None]:
    """Another session holds the items table: every write of a post waits for it."""
    with psycopg.connect(url) as conn:
        conn.execute("LOCK TABLE agent_channel_items IN ACCESS EXCLUSIVE MODE")
        try:
            yield
        finally:
            conn.rollback()


def _waiting_on_a_lock(url: str) -> bool:
    rows = _sql(
        url,
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'agent-channel'"
        " AND wait_event_type = 'Lock'",
    )
    return bool(rows[0][0])


def _until(condition: object, what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not callable(condition) or not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)  # polling an observable condition, under the deadline


# -- D2 ----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_d2_a_post_is_committed_before_it_returns(postgres_url: str) -> None:
    store = open_store(postgres_url)
    try:
        async with open_channel(journal=store.journal("e1")) as ch:
            ref = ch.ref()
            item = UserMessage("hello")
            seen: list[object] = []

            def post_and_look() -> None:  # from a thread, as producers post
                ref.post(item)
                query = "SELECT count(*) FROM agent_channel_items WHERE id = %s"
                seen.append(_sql(postgres_url, query, item.id)[0][0])

            await anyio.to_thread.run_sync(post_and_look)
            assert seen == [1]
            assert ch.withdraw(item.id)
            assert store.get("e1") is not None  # a read comes after the queued withdrawal
            assert _sql(postgres_url, "SELECT count(*) FROM agent_channel_items") == [(0,)]
    finally:
        store.close()


@pytest.mark.anyio
async def test_d2_a_post_waits_for_the_database_with_the_channel_free(postgres_url: str) -> None:
    """While a post's write waits on the server, the channel is not held: the consumer
    drains (under the channel's lock) and another thread posts; the post returns only
    once its write is committed."""
    store = open_store(postgres_url)
    try:
        async with open_channel(journal=store.journal("e1")) as ch:
            ref = ch.ref()
            returned = threading.Event()

            def post(text: str) -> None:
                ref.post(UserMessage(text))
                returned.set()

            with _items_locked(postgres_url):
                thread = threading.Thread(target=post, args=("first",))
                thread.start()
                await anyio.to_thread.run_sync(
                    _until, lambda: _waiting_on_a_lock(postgres_url), "the write to wait"
                )
                free = ch._lock.acquire(timeout=WAIT)  # pyright: ignore[reportPrivateUsage]
                assert free, "a post holds the channel's lock while it waits for the database"
                ch._lock.release()  # pyright: ignore[reportPrivateUsage]
                assert [i.text for i in ch.drain() if isinstance(i, UserMessage)] == ["first"]
                assert not returned.is_set()  # its write is not committed yet
            with anyio.fail_after(WAIT):
                await anyio.to_thread.run_sync(thread.join)
            assert returned.is_set()
            assert _sql(postgres_url, "SELECT count(*) FROM agent_channel_items") == [(1,)]
    finally:
        store.close()


def test_d2_posts_from_many_threads_are_written_in_queue_order(postgres_url: str) -> None:
    async def main() -> list[str]:
        store = open_store(postgres_url)
        async with open_channel(journal=store.journal("e1")) as ch:
            ref = ch.ref()

            def poster(k: int) -> None:
                for i in range(200):
                    ref.post(UserMessage(f"{k}:{i}"))

            threads = [threading.Thread(target=poster, args=(k,)) for k in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            queued = [i.id for i in ch.drain()]
            query = "SELECT id FROM agent_channel_items ORDER BY seq"
            assert [r[0] for r in _sql(postgres_url, query)] == queued
            ch.stop_reason = "end_turn"
        store.close()
        return queued

    assert len(anyio.run(main)) == 800


def test_d2_posts_left_to_the_store_and_withdrawals_are_written_by_its_thread(
    postgres_url: str,
) -> None:
    """A post whose settle never comes (its poster went away) is written by the store's
    thread, whether that thread sleeps, just wrote one (it is not woken then) or fell
    asleep again; a withdrawal is written at once, with nothing else to push it."""
    store = open_store(postgres_url)
    db = store._db  # pyright: ignore[reportPrivateUsage]

    def count(item: UserMessage) -> object:
        query = "SELECT count(*) FROM agent_channel_items WHERE id = %s"
        return _sql(postgres_url, query, item.id)[0][0]

    try:
        journal = store.journal("e1")
        items = [UserMessage("asleep"), UserMessage("just wrote"), UserMessage("asleep again")]
        for k, item in enumerate(items):
            if k != 1:
                _until(lambda: db._sleeping, "the store's thread to sleep")  # pyright: ignore[reportPrivateUsage]
            assert journal.posted(item) is not None  # its wait is never called
            _until(lambda item=item: count(item) == 1, f"the thread to write {item.text!r}")
        journal.withdrawn(items[0].id)
        _until(lambda: count(items[0]) == 0, "the thread to write the withdrawal")
        assert journal.failure is None
    finally:
        store.close()


# -- N6: one database, several processes ----------------------------------------------


def test_n6_processes_sharing_a_database_deliver_every_acknowledged_post_once(
    postgres_url: str,
) -> None:
    """A process posting from a thread and checkpointing is SIGKILLed at random moments;
    another process (a node of its own, as far as the database can tell) goes on with the
    execution each time. While one holds it, no other may open it. Every post that returned
    is in the conversation or the queue exactly once, in order (the core's crash check)."""

    def refused_while_held() -> None:
        other = open_store(postgres_url)
        try:
            assert [e.id for e in other.executions("running")] == ["e1"]
            with pytest.raises(StoreBusy, match="in use by another running server") as e:
                other.journal("e1")
            assert "\n" not in str(e.value)
        finally:
            other.close()

    run_crash_check(postgres_url, kills=6, seed=6, while_held=refused_while_held)


# -- D7 ----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_d7_an_id_the_database_cannot_hold_fails_the_journal_in_one_line(
    postgres_url: str,
) -> None:
    """A NUL in an item's id: PostgreSQL's text cannot hold it. The journal fails with one
    line and the channel goes on in memory; the id is never written cut short."""
    store = open_store(postgres_url)
    try:
        journal = store.journal("e1")
        async with open_channel(journal=journal) as ch:
            item = UserMessage("hello", id="a\x00b")
            await anyio.to_thread.run_sync(ch.ref().post, item)
            failure = journal.failure
            assert failure is not None and "NUL" in failure and "\n" not in failure
            assert [i.id for i in ch.drain()] == [item.id]
        assert _sql(postgres_url, "SELECT count(*) FROM agent_channel_items") == [(0,)]
    finally:
        store.close()


@pytest.mark.anyio
async def test_d7_finished_executions_are_pruned_past_the_policy(postgres_url: str) -> None:
    store = PostgresStore(postgres_url, keep=2)
    try:
        for i in range(5):
            async with open_channel(journal=store.journal(f"done{i}")):
                pass
        store.journal("live")  # running: never pruned
        assert {e.id for e in store.executions()} == {"done3", "done4", "live"}
        store.keep_seconds = -1.0  # everything finished is now too old
        assert store.prune() == 2
        assert [e.id for e in store.executions()] == ["live"]
    finally:
        store.close()


@pytest.mark.anyio
async def test_d7_a_lost_connection_is_reported_and_the_execution_goes_on_in_memory(
    postgres_url: str,
) -> None:
    store = open_store(postgres_url)
    told: list[str] = []
    try:
        journal = store.journal("e1")
        journal.on_failure = told.append
        async with open_channel(journal=journal) as ch:
            ref = ch.ref()
            events: list[object] = []
            ref.subscribe(events.append)
            conv = Conversation(ch, [])
            _sql(
                postgres_url,
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE application_name = 'agent-channel' AND datname = current_database()",
            )
            with anyio.fail_after(WAIT):
                await anyio.to_thread.run_sync(ref.post, UserMessage("after the loss"))
            ref.post(UserMessage("still here"))
            items = ch.drain()
            assert [i.text for i in items if isinstance(i, UserMessage)] == [
                "after the loss",
                "still here",
            ]
            conv.extend(fold(items).messages)
            ch.checkpoint()
        assert len(told) == 1 and "goes on in memory" in told[0], told
        assert "postgresql://" in told[0] and "\n" not in told[0]
        assert journal.failure == told[0]
        assert [e.reason for e in events if isinstance(e, StoreFailed)] == told
    finally:
        store.close()


def test_d7_writes_waiting_past_the_limit_fail_the_journal_not_the_post(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The queue of writes is bounded: with the server stalled, a post past the limit is
    not queued; its journal fails (goes on in memory) and the post returns."""
    import agent_channel_postgres._db as db

    monkeypatch.setattr(db, "MAX_PENDING", 2)
    store = open_store(postgres_url)
    told: list[str] = []
    try:
        journal = store.journal("e1")
        journal.on_failure = told.append
        with store._db._mutex:  # pyright: ignore[reportPrivateUsage]  # the connection busy
            waits = [journal.posted(UserMessage(str(i))) for i in range(3)]
            assert waits[0] is not None and waits[1] is not None and waits[2] is None
            assert len(told) == 1 and "2 writes wait for the database" in told[0]
            assert journal.posted(UserMessage("later")) is None  # failed: in memory from here
        for wait in waits[:2]:
            assert wait is not None
            wait()
    finally:
        store.close()


# -- D8 ----------------------------------------------------------------------------------


def test_d8_an_unreachable_server_is_one_line_without_the_password() -> None:
    with socket_port() as port:
        url = f"postgresql://someone:s3cret@127.0.0.1:{port}/nowhere"
        with pytest.raises(StoreError) as e:
            open_store(url)
    line = str(e.value)
    assert "\n" not in line and "s3cret" not in line
    assert line.startswith(f"store postgresql://someone@127.0.0.1:{port}/nowhere cannot be opened")


@contextmanager
def socket_port() -> Iterator[int]:
    """A loopback port nothing listens on (bound, not listening, for the test's length)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield int(s.getsockname()[1])


def test_d8_a_database_from_a_newer_schema_is_refused(postgres_url: str) -> None:
    open_store(postgres_url).close()
    _sql(postgres_url, "UPDATE agent_channel_schema SET version = 7")
    with pytest.raises(
        StoreError, match=r"newer agent-channel \(schema 7; this one reads up to 1\)"
    ):
        open_store(postgres_url)
    assert _sql(postgres_url, "SELECT version FROM agent_channel_schema") == [(7,)]


def test_d8_a_new_database_gets_the_schema_and_two_openers_at_once_agree(
    postgres_url: str,
) -> None:
    stores: list[PostgresStore] = []
    errors: list[BaseException] = []

    def open_one() -> None:
        try:
            stores.append(open_store(postgres_url))
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for s in stores:
        s.close()
    assert errors == [] and len(stores) == 4
    assert _sql(postgres_url, "SELECT version FROM agent_channel_schema") == [(1,)]
    tables = {
        r[0]
        for r in _sql(
            postgres_url,
            "SELECT tablename FROM pg_tables WHERE tablename LIKE 'agent_channel_%%'",
        )
    }
    assert tables == {
        f"agent_channel_{t}" for t in ("schema", "executions", "messages", "items", "sections")
    }
