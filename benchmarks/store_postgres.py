"""Issue 31's figure for the PostgreSQL store (N6): post -> acknowledged, against SQLite.

    uv run python benchmarks/store_postgres.py [--rounds N] [--posts N]

A throwaway PostgreSQL (``agent_channel_postgres.testing.TemporaryServer``: the machine's
binaries, the loopback only, ``fsync`` on, its folder on this machine's disk) and, in the
same process, the SQLite store twice (default, and ``durable=True``), each in a temporary
folder on the same disk. Per side and round: ``ref.post`` of a ``UserMessage`` into a
channel whose journal is that store's, from the posting thread, until it returns (for a
client, the acknowledgement: the write is committed, and with ``durable=True`` or
PostgreSQL flushed to disk); every 100 posts the queue is drained and checkpointed, as a
boundary would, and that checkpoint is timed apart. The default sides' rounds come first,
then the durable sides' (apart: see ``GROUPS``); rounds alternate the sides' order so a
busy moment hits each. Per round a p50 and a p99; the median over rounds is reported, with
the ratios PostgreSQL / SQLite, each store in both modes, each PostgreSQL mode against the
SQLite mode of the same durability (default: a crash of the agent's process loses nothing;
``durable=True``: nor does a power cut, each post waits for a flush to disk). Target:
PostgreSQL's p99 <= 2x SQLite's. In the same rounds, the floor under a default post: its
insert alone through libpq on a connection of its own (the loopback's round trip and the
server's commit, no channel, no store), and its ratio to SQLite's post: where the floor
alone is over 2x, the target is the machine's scheduler's, not the store's.

Prints readable lines, then one JSON object. Not run in CI.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import psycopg
from agent_channel import Store, UserMessage, open_channel
from agent_channel_postgres import PostgresStore
from agent_channel_postgres.testing import TemporaryServer
from agent_channel_sqlite import open_store as open_sqlite

perf = time.perf_counter
TARGET_P99_RATIO = 2.0
PAIRS = (("postgres", "sqlite"), ("postgres_durable", "sqlite_durable"))
FLOOR = "pg_insert_alone"
GROUPS = (("sqlite", "postgres", FLOOR), ("sqlite_durable", "postgres_durable"))
"""Sides measured in the same rounds. The default sides' rounds are not interleaved with the
durable ones': an fsync of SQLite's (~4 ms at p99 on a disk others use) left the disk and
the server's log writer busy for whichever default side came next, and that side's tail
was the fsync's, not its own."""
"""Each PostgreSQL mode against the SQLite mode of the same durability."""


def pct(xs: Sequence[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def fs_type(path: Path) -> str:
    """The file system ``path`` is on (the longest mount point of /proc/self/mounts)."""
    best, kind = "", "?"
    with open("/proc/self/mounts") as f:
        for line in f:
            _, point, fstype, *_ = line.split()
            p = str(path)
            if (p == point or p.startswith(point.rstrip("/") + "/")) and len(point) > len(best):
                best, kind = point, fstype
    return kind


def scratch() -> Path:
    """A folder on a disk (not a tmpfs, where an fsync costs nothing)."""
    base = Path(tempfile.gettempdir()).resolve()
    if fs_type(base) in ("tmpfs", "ramfs"):
        base = Path(__file__).resolve().parent
    folder = Path(tempfile.mkdtemp(prefix="store-postgres-", dir=base))
    folder.chmod(0o755)  # the server may run as the postgres user (when we are root)
    return folder


async def _posts(store: Store, n: int) -> tuple[list[float], list[float]]:
    """``n`` posts' times, and the checkpoints' (one per 100 posts)."""
    journal = store.journal(uuid.uuid4().hex, {"bench": "posts"})
    posts: list[float] = []
    checkpoints: list[float] = []
    async with open_channel(journal=journal) as ch:
        ref = ch.ref()
        for i in range(n):
            item = UserMessage(f"note {i}: " + "an operator's message of a line or two " * 4)
            t = perf()
            ref.post(item)
            posts.append(perf() - t)
            if i % 100 == 99:
                ch.drain()
                t = perf()
                ch.checkpoint({"turns": i})
                checkpoints.append(perf() - t)
    return posts, checkpoints


def run(rounds: int, n: int) -> dict[str, Any]:
    tmp = scratch()
    try:
        with TemporaryServer(folder=tmp) as server:
            url = server.create_database("bench")
            stores: dict[str, Callable[[], Store]] = {
                "sqlite": lambda: open_sqlite(tmp / "default.db"),
                "sqlite_durable": lambda: open_sqlite(tmp / "durable.db", durable=True),
                "postgres": lambda: PostgresStore(url),
                "postgres_durable": lambda: PostgresStore(url, durable=True),
            }
            opened = {name: make() for name, make in stores.items()}
            floor = psycopg.connect(url, autocommit=True)
            try:
                return anyio.run(_measure, opened, floor, rounds, n) | {
                    "fs": fs_type(tmp),
                    "python": platform.python_version(),
                }
            finally:
                floor.close()
                for s in opened.values():
                    s.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _floor(conn: psycopg.Connection[Any], n: int) -> tuple[list[float], list[float]]:
    """``n`` round trips of a post's insert alone (no channel, no store: libpq's prepared
    insert of the same body, autocommit, ``synchronous_commit`` off): the loopback's floor
    under a post of the default store, measured in the same rounds."""
    pgconn = conn.pgconn
    body = UserMessage("note 0: " + "an operator's message of a line or two " * 4)
    data = body.model_dump_json().encode()
    times: list[float] = []
    for _ in range(n):
        values = [b"floor", uuid.uuid4().hex.encode(), data]
        t = perf()
        pgconn.exec_prepared(b"floor", values)
        times.append(perf() - t)
    conn.execute("DELETE FROM agent_channel_items WHERE execution = 'floor'")
    return times, []


async def _measure(
    stores: dict[str, Store], floor: psycopg.Connection[Any], rounds: int, n: int
) -> dict[str, Any]:
    floor.execute("SET synchronous_commit = off")
    floor.pgconn.prepare(
        b"floor", b"INSERT INTO agent_channel_items (execution, id, body) VALUES ($1, $2, $3)"
    )
    for store in stores.values():  # warm up: connections, caches, the first pages
        await _posts(store, n // 5)
    _floor(floor, n // 5)
    seen: dict[str, list[tuple[list[float], list[float]]]] = {k: [] for k in [*stores, FLOOR]}
    for group in GROUPS:  # a mode's rounds apart from the other's: no fsync storm between
        names = [name for name in group if name in seen]
        for r in range(rounds):
            order = names if r % 2 == 0 else names[::-1]
            for name in order:
                if name == FLOOR:
                    seen[name].append(_floor(floor, n))
                else:
                    seen[name].append(await _posts(stores[name], n))
    row: dict[str, Any] = {"posts_per_round": n, "rounds": rounds}
    for name, runs in seen.items():
        for q in (0.5, 0.99):
            tag = f"p{round(q * 100)}"
            row[f"{name}_{tag}_us"] = round(statistics.median(pct(p, q) * 1e6 for p, _ in runs), 1)
        if name != FLOOR:
            row[f"{name}_checkpoint_p50_us"] = round(
                statistics.median(pct(c, 0.5) * 1e6 for _, c in runs), 1
            )
        row[f"{name}_max_us"] = round(statistics.median(max(p) * 1e6 for p, _ in runs), 1)
    for ours, base in PAIRS:
        for tag in ("p50", "p99"):
            row[f"{ours}_vs_{base}_{tag}"] = round(
                row[f"{ours}_{tag}_us"] / row[f"{base}_{tag}_us"], 2
            )
        row[f"{ours}_p99_met"] = row[f"{ours}_vs_{base}_p99"] <= TARGET_P99_RATIO
    for tag in ("p50", "p99"):  # the loopback's share: the floor against SQLite's post
        row[f"{FLOOR}_vs_sqlite_{tag}"] = round(
            row[f"{FLOOR}_{tag}_us"] / row[f"sqlite_{tag}_us"], 2
        )
        row[f"postgres_over_{FLOOR}_{tag}_us"] = round(
            row[f"postgres_{tag}_us"] - row[f"{FLOOR}_{tag}_us"], 1
        )
    row["target_p99_ratio"] = TARGET_P99_RATIO
    return row


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--posts", type=int, default=500)
    args = parser.parse_args(argv)
    row = run(args.rounds, args.posts)
    for name in ("sqlite", "sqlite_durable", "postgres", "postgres_durable"):
        print(
            f"{name:17} post p50 {row[f'{name}_p50_us']:8.1f} us  p99 {row[f'{name}_p99_us']:8.1f}"
            f" us  max {row[f'{name}_max_us']:8.1f} us  checkpoint p50"
            f" {row[f'{name}_checkpoint_p50_us']:8.1f} us"
        )
    print(
        f"{FLOOR:17} post p50 {row[f'{FLOOR}_p50_us']:8.1f} us  p99 {row[f'{FLOOR}_p99_us']:8.1f}"
        " us  (a post's insert alone: the loopback's round trip and the server's commit)"
    )
    for ours, base in PAIRS:
        print(
            f"{ours:17} / {base:15} p50 {row[f'{ours}_vs_{base}_p50']:5.2f}x"
            f"  p99 {row[f'{ours}_vs_{base}_p99']:5.2f}x  (target p99 <= {TARGET_P99_RATIO}x)"
        )
    print(
        f"{FLOOR:17} / {'sqlite':15} p50 {row[f'{FLOOR}_vs_sqlite_p50']:5.2f}x"
        f"  p99 {row[f'{FLOOR}_vs_sqlite_p99']:5.2f}x  (the floor under postgres / sqlite;"
        f" postgres's p99 above it: {row[f'postgres_over_{FLOOR}_p99_us']:.1f} us)"
    )
    print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
