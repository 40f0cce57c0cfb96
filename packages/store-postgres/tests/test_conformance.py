"""The PostgreSQL store against the core's store conformance suite, on a real server, in
both modes (``durable=True``: ``synchronous_commit`` on)."""

from __future__ import annotations

import pytest
from agent_channel.testing import STORE_CHECKS, StoreCheck
from agent_channel_postgres import open_store


@pytest.mark.parametrize("durable", [False, True], ids=["default", "durable"])
@pytest.mark.parametrize("check", STORE_CHECKS.values(), ids=list(STORE_CHECKS))
def test_postgres_store_conformance(check: StoreCheck, postgres_url: str, durable: bool) -> None:
    check(lambda: open_store(postgres_url, durable=durable))


def test_the_core_opens_it_by_its_url_schemes(postgres_url: str) -> None:
    """``agent_channel.open_store`` finds it by entry point, as ``--store`` does."""
    from agent_channel import open_store as open_any

    for spec in (postgres_url, postgres_url.replace("postgresql://", "postgres://", 1)):
        store = open_any(spec)
        try:
            assert type(store).__name__ == "PostgresStore"
            assert store.executions() == []
        finally:
            store.close()
