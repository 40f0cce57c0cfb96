"""Outside any execution, and on a channel without a journal, the durability surface is
inert: ``durable`` is false, ``restored`` is ``None`` and ``checkpoint`` does nothing."""

from __future__ import annotations

import pytest
from agent_channel import agent_channel, open_channel
from agent_channel.testing import MemoryStore

pytestmark = pytest.mark.anyio


def test_the_inert_channel_has_no_journal() -> None:
    ch = agent_channel()
    assert ch.durable is False
    assert ch.restored is None
    ch.checkpoint({"turns": 1})  # before: AttributeError (the inert channel had no _journal)


async def test_durable_says_whether_a_journal_is_written() -> None:
    async with open_channel() as ch:
        assert ch.durable is False
        ch.checkpoint({"turns": 1})
    store = MemoryStore()
    async with open_channel(journal=store.journal("e1")) as ch:
        assert ch.durable is True
        assert ch.restored is None
