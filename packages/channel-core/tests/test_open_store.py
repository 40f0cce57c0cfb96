"""``open_store``: a path or a URL, opened by the store its scheme names (entry points)."""

from __future__ import annotations

from pathlib import Path

import pytest
from agent_channel import StoreError, open_store


def test_a_path_and_a_sqlite_url_open_the_sqlite_store(tmp_path: Path) -> None:
    from agent_channel_sqlite import SqliteStore

    by_path = open_store(tmp_path / "a.db")
    by_text = open_store(str(tmp_path / "b.db"))
    by_url = open_store(f"sqlite://{tmp_path / 'c.db'}", durable=True)
    try:
        for store, name in ((by_path, "a.db"), (by_text, "b.db"), (by_url, "c.db")):
            assert isinstance(store, SqliteStore)
            assert store.path == tmp_path / name
    finally:
        for store in (by_path, by_text, by_url):
            store.close()


def test_an_unknown_scheme_is_one_line_naming_the_installed_stores() -> None:
    with pytest.raises(
        StoreError, match=r"^no store for nosuch:// is installed \(installed: .*sqlite"
    ):
        open_store("nosuch://host/db")


def test_a_store_refusal_is_its_own_store_error(tmp_path: Path) -> None:
    bad = tmp_path / "not-a-store.db"
    bad.write_text("hello")
    with pytest.raises(StoreError):
        open_store(bad)
