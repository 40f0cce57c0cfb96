"""The SQLite store against the core's conformance suite; schema 2 (named sections, the
migration from a schema 1 file); ``durable=True``: a post waits for the fsync that covers
it, a checkpoint does not."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from pathlib import Path

import pytest
from agent_channel import ChatMessageUser, UserMessage
from agent_channel.testing import STORE_CHECKS, StoreCheck
from agent_channel_sqlite import SCHEMA, SqliteStore, open_store

WAIT = 10.0
"""Seconds a test waits for something that happens at once (a guard against a hang)."""


@pytest.fixture(params=[False, True], ids=["default", "durable"])
def durable(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


@pytest.mark.parametrize("check", STORE_CHECKS.values(), ids=list(STORE_CHECKS))
def test_sqlite_store_conformance(check: StoreCheck, tmp_path: Path, durable: bool) -> None:
    check(lambda: open_store(tmp_path / "s.db", durable=durable))


# -- schema 2: sections --------------------------------------------------------------------

SCHEMA_1 = (  # as agent-channel-core 0.2's store wrote it (frozen here: never edit)
    "CREATE TABLE executions (id TEXT PRIMARY KEY, status TEXT NOT NULL, meta TEXT NOT NULL,"
    " state TEXT, children TEXT, created REAL NOT NULL, updated REAL NOT NULL,"
    " restored REAL, messages INTEGER NOT NULL DEFAULT 0, stop_reason TEXT, error TEXT)",
    "CREATE TABLE messages (execution TEXT NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL,"
    " PRIMARY KEY (execution, seq)) WITHOUT ROWID",
    "CREATE TABLE items (seq INTEGER PRIMARY KEY, execution TEXT NOT NULL, id TEXT NOT NULL,"
    " body TEXT NOT NULL)",
    "CREATE INDEX items_by_execution ON items (execution, id)",
    "CREATE INDEX executions_by_status ON executions (status, updated)",
    "PRAGMA user_version = 1",
)


def test_d8_a_schema_1_file_is_migrated_and_its_children_become_a_section(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    children = '[{"id": "c1", "title": "a child"}]'
    message = ChatMessageUser(content="before the upgrade")
    item = UserMessage("queued before the upgrade")
    with sqlite3.connect(path) as db:
        for statement in SCHEMA_1:
            db.execute(statement)
        db.execute(
            "INSERT INTO executions (id, status, meta, state, children, created, updated,"
            " messages) VALUES ('e1', 'running', ?, ?, ?, 1.0, 2.0, 1)",
            (json.dumps({"title": "old"}), json.dumps({"turns": 3}), children),
        )
        db.execute(
            "INSERT INTO executions (id, status, meta, created, updated)"
            " VALUES ('e2', 'running', '{}', 1.0, 1.0)"
        )
        db.execute("INSERT INTO messages VALUES ('e1', 0, ?)", (message.model_dump_json(),))
        db.execute(
            "INSERT INTO items (execution, id, body) VALUES ('e1', ?, ?)",
            (item.id, item.model_dump_json()),
        )
    db.close()
    store = open_store(path)
    try:
        restored = store.journal("e1").restored()
        assert restored is not None
        assert dict(restored.sections) == {"children": children}
        assert restored.state == {"turns": 3}
        assert [m.text for m in restored.messages] == ["before the upgrade"]
        assert [i.id for i in restored.pending] == [item.id]
        other = store.journal("e2").restored()
        assert other is not None and dict(other.sections) == {}
    finally:
        store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA == 2
        assert (
            db.execute("SELECT count(*) FROM executions WHERE children IS NOT NULL").fetchone()[0]
            == 0
        )
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


def _syncs_of(store: SqliteStore) -> list[str]:
    """The files the store's syncer fsyncs from now on (its fsync, wrapped)."""
    syncer = store._syncer  # pyright: ignore[reportPrivateUsage]
    assert syncer is not None
    seen: list[str] = []
    real = syncer.fsync

    def fsync(fd: int) -> None:
        seen.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    syncer.fsync = fsync
    return seen


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to name an fd")
def test_d2_durable_a_post_waits_for_an_fsync_of_the_log_and_a_commit_does_not(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.db"
    store = open_store(path, durable=True)
    syncer = store._syncer  # pyright: ignore[reportPrivateUsage]
    assert syncer is not None
    try:
        journal = store.journal("e1")
        syncs = _syncs_of(store)
        returned = threading.Event()

        def post() -> None:
            journal.posted(UserMessage("must survive a power cut"))
            returned.set()

        with syncer.hold():  # no fsync can start
            poster = threading.Thread(target=post)
            poster.start()
            assert syncer.waiting(1, WAIT)  # the post waits for an fsync
            assert not returned.is_set()
            # Its row is committed (a process crash keeps it): another connection sees it.
            with sqlite3.connect(path) as db:
                assert db.execute("SELECT count(*) FROM items").fetchone()[0] == 1
            db.close()
            # A checkpoint meanwhile returns without waiting for the disk.
            journal.commit([ChatMessageUser(content="hi")], (), {"turns": 1}, start=0)
            assert not returned.is_set()
        assert returned.wait(WAIT)  # released: one fsync covers the post and the commit
        poster.join(WAIT)
        assert syncs and all(s == f"{path}-wal" for s in syncs)
        assert journal.failure is None
    finally:
        store.close()


def test_d3_durable_a_commit_alone_is_synced_within_the_interval(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s.db", durable=True)
    syncer = store._syncer  # pyright: ignore[reportPrivateUsage]
    assert syncer is not None
    try:
        journal = store.journal("e1")
        journal.commit([ChatMessageUser(content="hi")], (), None, start=0)
        assert syncer.synced(syncer.written, WAIT)  # nobody waited, yet it was synced
    finally:
        store.close()


def test_d7_durable_a_failed_fsync_stops_writing_and_is_told_once(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s.db", durable=True)
    syncer = store._syncer  # pyright: ignore[reportPrivateUsage]
    assert syncer is not None
    try:
        journal = store.journal("e1")
        told: list[str] = []
        journal.on_failure = told.append

        def broken(fd: int) -> None:
            raise OSError(5, "Input/output error")

        syncer.fsync = broken
        journal.posted(UserMessage("not durable"))  # returns: the agent goes on in memory
        journal.commit((), (), {"turns": 1}, start=0)
        journal.posted(UserMessage("after"))
        assert len(told) == 1 and "Input/output error" in told[0]
        assert journal.failure == told[0]
    finally:
        store.close()


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
    assert f"agent-channel-sync-{path.name}" in {t.name for t in threading.enumerate()}
    syncs = _syncs_of(store) if Path("/proc/self/fd").is_dir() else None
    store.journal("e1").commit([ChatMessageUser(content="hi")], (), None, start=0)
    store.close()
    assert f"agent-channel-sync-{path.name}" not in {t.name for t in threading.enumerate()}
    if syncs is not None:
        assert syncs  # the commit was synced, at the latest by the last fsync
