"""The store (issue 19): D1 one file, D2 write-ahead exactly once, D3 the boundary's
commit, D6 children lost in a restart, D7 bounds, D8 bad stores."""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import anyio
import pytest
from agent_channel import (
    Announce,
    ChatMessageSystem,
    ChatMessageUser,
    Conversation,
    StoreBusy,
    StoreError,
    StoreFailed,
    UserMessage,
    fold,
    open_channel,
    open_supervisor,
)
from agent_channel.testing import run_crash_check
from agent_channel_sqlite import SqliteStore, default_store_path, open_store


def _texts(store: SqliteStore, execution_id: str) -> list[str]:
    return [m.text for m in store.messages(execution_id)]


def _raw(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- D1 ----------------------------------------------------------------------------------


def test_d1_a_store_is_one_sqlite_file_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "store.db"
    store = open_store(path)
    try:
        assert path.is_file()
        with _raw(path) as db:
            assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            assert db.execute("PRAGMA user_version").fetchone()[0] == 2
    finally:
        store.close()


def test_d1_the_default_path_is_the_users_state_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert default_store_path() == tmp_path / "agent-channel" / "store.db"
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_store_path() == tmp_path / ".local" / "state" / "agent-channel" / "store.db"


# -- D2, D3 --------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_d2_a_post_is_in_the_store_before_it_returns(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s.db")
    try:
        async with open_channel(journal=store.journal("e1")) as ch:
            ref = ch.ref()
            item = UserMessage("hello")
            seen: list[int] = []

            def post_and_look() -> None:  # from a thread, as producers post
                ref.post(item)
                with _raw(store.path) as db:  # another connection: what a crash would leave
                    seen.append(
                        db.execute(
                            "SELECT count(*) FROM items WHERE id = ?", (item.id,)
                        ).fetchone()[0]
                    )

            await anyio.to_thread.run_sync(post_and_look)
            assert seen == [1]
            assert ch.withdraw(item.id)
            with _raw(store.path) as db:
                assert db.execute("SELECT count(*) FROM items").fetchone()[0] == 0
    finally:
        store.close()


@pytest.mark.anyio
async def test_d2_d3_drained_items_count_as_taken_only_once_committed(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = open_store(path)
    with anyio.CancelScope() as outer:  # an outer cancellation records no end: a "crash"
        async with open_channel(journal=store.journal("e1", {"cwd": "/w"})) as ch:
            ref = ch.ref()
            conv = Conversation(ch, [ChatMessageSystem(content="sys")])
            ref.post(UserMessage("one"))
            ref.post(UserMessage("two"))
            conv.extend(fold(ch.drain()).messages)
            ch.checkpoint({"turns": 1})
            ref.post(UserMessage("three"))
            ref.post(UserMessage("four"))
            conv.extend(fold(ch.drain()).messages)  # drained and folded, not committed
            outer.cancel()
            await anyio.sleep_forever()
    store.close()

    store = open_store(path)
    try:
        (row,) = store.executions()
        assert (row.id, row.status, row.meta, row.messages) == ("e1", "running", {"cwd": "/w"}, 2)
        journal = store.journal("e1")
        restored = journal.restored()
        assert restored is not None
        assert [m.text for m in restored.messages] == ["sys", "one\n\ntwo"]
        assert restored.state == {"turns": 1}
        async with open_channel(journal=journal) as ch:
            assert ch.restored is restored
            conv = Conversation(ch, list(restored.messages))
            items = ch.drain()  # re-queued in their order, each once
            assert [i.text for i in items if isinstance(i, UserMessage)] == ["three", "four"]
            conv.extend(fold(items).messages)
            ch.checkpoint({"turns": 2})
            ch.stop_reason = "end_turn"
        (row,) = store.executions()
        assert (row.status, row.stop_reason, row.messages) == ("ended", "end_turn", 3)
        assert row.restored is not None
        assert _texts(store, "e1") == ["sys", "one\n\ntwo", "three\n\nfour"]
        with pytest.raises(StoreError, match="ended: it cannot go on"):
            store.journal("e1")
    finally:
        store.close()


@pytest.mark.anyio
async def test_d3_a_consumer_that_starts_over_rewrites_the_conversation(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = open_store(path)
    with anyio.CancelScope() as outer:
        async with open_channel(journal=store.journal("e1")) as ch:
            Conversation(ch, [ChatMessageUser(content="old")])
            ch.checkpoint()
            outer.cancel()
            await anyio.sleep_forever()
    async with open_channel(journal=store.journal("e1")) as ch:
        Conversation(ch, [ChatMessageUser(content="new"), ChatMessageUser(content="again")])
        ch.checkpoint()
    assert _texts(store, "e1") == ["new", "again"]
    store.close()


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_d2_every_acknowledged_post_is_delivered_once_across_sigkills(
    tmp_path: Path, backend: str
) -> None:
    """A process posting from a thread and committing boundaries is SIGKILLed at random
    moments and restarted: every post that returned is in the conversation or the queue
    exactly once, in order, and nothing else is (the core's crash check)."""
    run_crash_check(str(tmp_path / "s.db"), backend=backend)


# -- D6 ----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_d6_children_running_at_a_crash_are_announced_lost_once(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = open_store(path)
    started = anyio.Event()

    async def child(task: str) -> str:
        started.set()
        await anyio.sleep_forever()
        return task

    with anyio.CancelScope() as outer:
        async with open_channel(journal=store.journal("e1")) as ch:
            ch.ref()
            async with open_supervisor() as sup:
                child_id = sup.spawn(child, "research", name="scout")
                await started.wait()
                Conversation(ch, [])
                ch.checkpoint()
                outer.cancel()
                await anyio.sleep_forever()
    for round_ in range(2):  # restored twice: announced once (the registry was cleared)
        with anyio.CancelScope() as outer:
            async with open_channel(journal=store.journal("e1")) as ch:
                items = ch.drain()
                Conversation(ch, []).extend(fold(items).messages)
                ch.checkpoint()  # the announcement is read: it is not delivered again
                announced = [i for i in items if isinstance(i, Announce)]
                if round_ == 0:
                    assert [(a.child_id, a.name, a.status) for a in announced] == [
                        (child_id, "scout", "lost")
                    ]
                    assert "lost in a restart" in announced[0].text
                else:
                    assert announced == []
                outer.cancel()
                await anyio.sleep_forever()
    store.close()


# -- D7 ----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_d7_finished_executions_are_pruned_past_the_policy(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db", keep=2)
    try:
        for i in range(5):
            async with open_channel(journal=store.journal(f"done{i}")):
                pass
        store.journal("live")  # running: never pruned
        ids = {e.id for e in store.executions()}
        assert ids == {"done3", "done4", "live"}
        store.keep_seconds = -1.0  # everything finished is now too old
        assert store.prune() == 2
        assert [e.id for e in store.executions()] == ["live"]
    finally:
        store.close()


@pytest.mark.anyio
async def test_d7_a_full_disk_is_reported_and_the_execution_goes_on_in_memory(
    tmp_path: Path,
) -> None:
    store = open_store(tmp_path / "s.db")
    told: list[str] = []
    try:
        journal = store.journal("e1")
        journal.on_failure = told.append
        async with open_channel(journal=journal) as ch:
            ref = ch.ref()
            events: list[object] = []
            ref.subscribe(events.append)
            conv = Conversation(ch, [])
            db = store._db  # pyright: ignore[reportPrivateUsage]
            pages = db.execute("PRAGMA page_count").fetchone()[0]
            db.execute(f"PRAGMA max_page_count = {pages}")  # the disk is now full
            ref.post(UserMessage("x" * 100_000))
            ref.post(UserMessage("still here"))
            items = ch.drain()
            assert [i.text[:10] for i in items if isinstance(i, UserMessage)] == [
                "x" * 10,
                "still here",
            ]
            conv.extend(fold(items).messages)
            ch.checkpoint()
        assert len(told) == 1 and "full" in told[0] and "goes on in memory" in told[0]
        assert journal.failure == told[0]
        failed = [e for e in events if isinstance(e, StoreFailed)]
        assert [e.reason for e in failed] == told  # once, whatever failed after
    finally:
        store.close()


# -- D8 ----------------------------------------------------------------------------------


def _stored(path: Path) -> None:
    store = open_store(path)
    journal = store.journal("e1", {"cwd": "/w"})
    for i in range(200):
        journal.posted(UserMessage(f"message {i} " * 20))
    store.close()


@pytest.mark.parametrize("keep", [0.5, 0.02])
def test_d8_a_truncated_store_is_refused_with_one_line_and_not_written(
    tmp_path: Path, keep: float
) -> None:
    path = tmp_path / "s.db"
    _stored(path)
    with _raw(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])
    before = _digest(path)
    with pytest.raises(StoreError) as e:
        open_store(path)
    assert "\n" not in str(e.value) and str(path) in str(e.value)
    assert "damaged" in str(e.value) or "not a readable store" in str(e.value)
    assert _digest(path) == before


def test_d8_a_store_from_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    _stored(path)
    with _raw(path) as db:
        db.execute("PRAGMA user_version = 7")
    before = _digest(path)
    with pytest.raises(
        StoreError, match=r"newer agent-channel \(schema 7; this one reads up to 2\)"
    ):
        open_store(path)
    assert _digest(path) == before


def test_d8_a_file_that_is_not_a_store_is_refused(tmp_path: Path) -> None:
    garbage = tmp_path / "notes.txt"
    garbage.write_text("not a database, just notes\n" * 100)
    other = tmp_path / "other.db"
    with _raw(other) as db:
        db.execute("CREATE TABLE t (x)")
    for path, words in ((garbage, "not a readable store"), (other, "of something else")):
        before = _digest(path)
        with pytest.raises(StoreError, match=words):
            open_store(path)
        assert _digest(path) == before


def test_d8_a_store_in_use_by_another_live_process_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    _stored(path)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from agent_channel_sqlite import open_store; s = open_store(sys.argv[1]);"
            " print('held', flush=True); sys.stdin.read()",
            str(path),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(StoreBusy, match="in use by another running server"):
            open_store(path)
    finally:
        holder.communicate("")
    open_store(path).close()  # its death released it


def test_d8_a_schema_zero_file_is_migrated_from_the_first_version_on(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    path.touch()  # an empty file: SQLite's "version 0", nothing in it
    store = open_store(path)
    store.close()
    with _raw(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 2
        names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"executions", "messages", "items", "sections"} <= names


def test_d2_posts_from_many_threads_are_written_in_queue_order(tmp_path: Path) -> None:
    async def main() -> list[str]:
        store = open_store(tmp_path / "s.db")
        async with open_channel(journal=store.journal("e1")) as ch:
            ref = ch.ref()

            def poster(k: int) -> None:
                for i in range(300):
                    ref.post(UserMessage(f"{k}:{i}"))

            threads = [threading.Thread(target=poster, args=(k,)) for k in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            queued = [i.id for i in ch.drain()]
            with _raw(store.path) as db:
                stored = [r[0] for r in db.execute("SELECT id FROM items ORDER BY seq")]
            assert stored == queued
            ch.stop_reason = "end_turn"
        store.close()
        return queued

    assert len(anyio.run(main)) == 1200


def test_d7_the_wal_is_checkpointed_off_the_writers_thread_and_the_thread_ends_at_close(
    tmp_path: Path,
) -> None:
    """Writers never checkpoint (a write crossing SQLite's autocheckpoint paid its fsync);
    the store's own thread does, so the log is copied back and its pages reused."""
    path = tmp_path / "s.db"
    store = open_store(path)
    names = {t.name for t in threading.enumerate()}
    assert f"agent-channel-wal-{path.name}" in names
    journal = store.journal("e1")
    for i in range(3000):  # past the checkpointer's count of writes, many times
        journal.posted(UserMessage(f"message {i} " * 30))
    store.close()
    assert f"agent-channel-wal-{path.name}" not in {t.name for t in threading.enumerate()}
    with _raw(path) as db:  # everything written is in the database file itself
        assert db.execute("SELECT count(*) FROM items").fetchone()[0] == 3000
    wal = path.with_name(path.name + "-wal")
    assert not wal.exists() or wal.stat().st_size < path.stat().st_size
