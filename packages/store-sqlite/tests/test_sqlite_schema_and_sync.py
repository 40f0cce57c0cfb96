"""The SQLite store against the core's conformance suite; schema 2 (named sections, the
migration from a schema 1 file); ``durable=True``: a post waits for the fsync that covers
it, a checkpoint does not."""

from __future__ import annotations

import os
import shutil
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_channel import ChatMessageUser, UserMessage
from agent_channel.testing import STORE_CHECKS, StoreCheck
from agent_channel_sqlite import SCHEMA, SqliteStore, open_store
from agent_channel_sqlite._sync import Syncer

WAIT = 10.0
"""Seconds a test waits for something that happens at once (a guard against a hang)."""


@pytest.fixture(params=[False, True], ids=["default", "durable"])
def durable(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


@pytest.mark.parametrize("check", STORE_CHECKS.values(), ids=list(STORE_CHECKS))
def test_sqlite_store_conformance(check: StoreCheck, tmp_path: Path, durable: bool) -> None:
    check(lambda: open_store(tmp_path / "s.db", durable=durable))


# -- schema 2: sections --------------------------------------------------------------------

SCHEMA_1 = Path(__file__).with_name("data") / "schema1.db"
"""A store written by agent-channel-core 0.2's own SQLite store (schema 1), closed cleanly:
execution ``e1`` running (two messages, state, a child in the ``children`` column, a queued
item), ``e2`` ended. Made once with that release's ``open_store``; never rewrite it."""


def test_d8_a_schema_1_file_is_migrated_and_its_children_become_a_section(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    shutil.copyfile(SCHEMA_1, path)
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 1
        (children,) = db.execute("SELECT children FROM executions WHERE id = 'e1'").fetchone()
    db.close()
    store = open_store(path)
    try:
        restored = store.journal("e1").restored()
        assert restored is not None
        assert dict(restored.sections) == {"agent_channel.children": children}
        assert [(c.id, c.name) for c in restored.children] == [("c1", "researcher")]
        assert restored.state == {"turns": 3}
        assert [m.text for m in restored.messages] == ["before the upgrade", "noted"]
        assert [i.id for i in restored.pending] == ["item-1"]
        ended = store.get("e2")
        assert ended is not None and ended.status == "ended"
        assert store.journal("e3").restored() is None  # and it takes new executions
    finally:
        store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA == 2
        left = db.execute("SELECT count(*) FROM executions WHERE children IS NOT NULL")
        assert left.fetchone()[0] == 0
    db.close()


def test_sections_are_rows_of_their_own_and_pruned_with_their_execution(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SqliteStore(path, keep=0)
    try:
        journal = store.journal("e1")
        journal.commit((), (), None, start=0, sections={"children": "[]", "notes": '"n"'})
        with sqlite3.connect(path) as db:
            rows = db.execute("SELECT name, body FROM sections ORDER BY name").fetchall()
        assert rows == [("children", "[]"), ("notes", '"n"')]
        journal.finish("ended", None, None)  # keep=0: pruned at once
        with sqlite3.connect(path) as db:
            assert db.execute("SELECT count(*) FROM sections").fetchone()[0] == 0
    finally:
        store.close()


# -- durable=True ----------------------------------------------------------------------------


@pytest.fixture
def durable_store(tmp_path: Path) -> Iterator[tuple[SqliteStore, Syncer]]:
    """A ``durable=True`` store at ``tmp_path / "s.db"``, and its syncer."""
    store = open_store(tmp_path / "s.db", durable=True)
    syncer = store._syncer  # pyright: ignore[reportPrivateUsage]
    assert syncer is not None
    try:
        yield store, syncer
    finally:
        store.close()


def _syncs_of(syncer: Syncer) -> list[str]:
    """The files ``syncer`` fsyncs from now on (its fsync, wrapped)."""
    seen: list[str] = []
    real = syncer.fsync

    def fsync(fd: int) -> None:
        seen.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    syncer.fsync = fsync
    return seen


HAS_PROC = Path("/proc/self/fd").is_dir()


@pytest.mark.skipif(not HAS_PROC, reason="needs /proc to name an fd")
def test_d2_durable_a_post_waits_for_an_fsync_of_the_log_and_a_commit_does_not(
    durable_store: tuple[SqliteStore, Syncer],
) -> None:
    store, syncer = durable_store
    journal = store.journal("e1")
    syncs = _syncs_of(syncer)
    returned = threading.Event()

    def post() -> None:
        settle = journal.posted(UserMessage("must survive a power cut"))
        assert settle is not None  # durable: the channel calls it with its lock free
        settle()
        returned.set()

    with syncer.hold():  # no fsync can start
        poster = threading.Thread(target=post)
        poster.start()
        assert syncer.waiting(1, WAIT)  # the post waits for an fsync
        assert not returned.is_set()
        # Its row is committed (a process crash keeps it): another connection sees it.
        with sqlite3.connect(store.path) as db:
            assert db.execute("SELECT count(*) FROM items").fetchone()[0] == 1
        db.close()
        # A checkpoint meanwhile returns without waiting for the disk.
        journal.commit([ChatMessageUser(content="hi")], (), {"turns": 1}, start=0)
        assert not returned.is_set()
    assert returned.wait(WAIT)  # released: one fsync covers the post and the commit
    poster.join(WAIT)
    assert syncs and all(s == f"{store.path}-wal" for s in syncs)
    assert journal.failure is None


def test_d3_durable_a_commit_alone_is_synced_within_the_interval(
    durable_store: tuple[SqliteStore, Syncer],
) -> None:
    store, syncer = durable_store
    store.journal("e1").commit([ChatMessageUser(content="hi")], (), None, start=0)
    assert syncer.synced(syncer.written, WAIT)  # nobody waited, yet it was synced


def test_d7_durable_a_failed_fsync_stops_writing_and_is_told_once(
    durable_store: tuple[SqliteStore, Syncer],
) -> None:
    store, syncer = durable_store
    journal = store.journal("e1")
    told: list[str] = []
    journal.on_failure = told.append

    def broken(fd: int) -> None:
        raise OSError(5, "Input/output error")

    syncer.fsync = broken
    settle = journal.posted(UserMessage("not durable"))
    assert settle is not None
    settle()  # returns: the agent goes on in memory
    journal.commit((), (), {"turns": 1}, start=0)
    journal.posted(UserMessage("after"))
    assert len(told) == 1 and "Input/output error" in told[0]
    assert journal.failure == told[0]


def test_the_default_store_has_no_syncer(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = open_store(path)
    try:
        assert store._syncer is None  # pyright: ignore[reportPrivateUsage]
        assert f"agent-channel-sync-{path.name}" not in {t.name for t in threading.enumerate()}
    finally:
        store.close()


def test_durable_the_syncer_thread_ends_at_close_after_a_last_fsync(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = open_store(path, durable=True)
    syncer = store._syncer  # pyright: ignore[reportPrivateUsage]
    assert syncer is not None
    assert f"agent-channel-sync-{path.name}" in {t.name for t in threading.enumerate()}
    syncs = _syncs_of(syncer) if HAS_PROC else None
    with syncer.hold():  # this commit is synced by nothing but the last fsync
        store.journal("e1").commit([ChatMessageUser(content="hi")], (), None, start=0)
        store.close()
    assert f"agent-channel-sync-{path.name}" not in {t.name for t in threading.enumerate()}
    assert syncer.synced(syncer.written, 0)
    if syncs is not None:
        assert syncs


@pytest.mark.anyio
async def test_d2_durable_a_post_waiting_for_its_fsync_holds_no_lock_of_the_channel(
    durable_store: tuple[SqliteStore, Syncer],
) -> None:
    """The post from another thread waits for the disk with the channel free: the loop
    drains meanwhile, and another producer's calls go on (written in queue order still)."""
    from agent_channel import open_channel

    store, syncer = durable_store
    returned = threading.Event()
    other = threading.Event()
    async with open_channel(journal=store.journal("e1")) as ch:
        ref = ch.ref()
        item = UserMessage("durable before its acknowledgement")

        def post() -> None:
            ref.post(item)
            returned.set()

        def another_producer() -> None:
            ref.withdraw("no such item")  # takes the channel's lock
            other.set()

        with syncer.hold():  # no fsync can start
            poster = threading.Thread(target=post)
            poster.start()
            assert syncer.waiting(1, WAIT)  # the post waits for an fsync...
            threading.Thread(target=another_producer).start()
            assert other.wait(WAIT)  # ...and holds no lock meanwhile
            assert ch.drain() == [item]  # queued at its write: the consumer may take it
            assert not returned.is_set()  # but the post is not acknowledged before the fsync
        assert returned.wait(WAIT)
        poster.join(WAIT)
