"""The PostgreSQL store against the core's store conformance suite, on a real server."""

from __future__ import annotations

import pytest
from agent_channel.testing import STORE_CHECKS, StoreCheck
from agent_channel_postgres import open_store


@pytest.mark.parametrize("check", STORE_CHECKS.values(), ids=list(STORE_CHECKS))
def test_postgres_store_conformance(check: StoreCheck, postgres_url: str) -> None:
    check(lambda: open_store(postgres_url))
