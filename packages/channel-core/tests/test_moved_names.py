"""Names that moved out of the core keep working for one minor version, with a warning."""

from __future__ import annotations

import sys

import agent_channel
import pytest


@pytest.mark.parametrize("name", ["SqliteStore", "default_store_path"])
def test_a_moved_name_warns_and_is_the_new_one(name: str) -> None:
    import agent_channel_sqlite

    with pytest.warns(DeprecationWarning, match=f"from agent_channel_sqlite import {name}"):
        value = getattr(agent_channel, name)
    assert value is getattr(agent_channel_sqlite, name)
    assert name not in agent_channel.__all__


def test_a_moved_name_without_its_distribution_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "agent_channel_sqlite", None)  # as if not installed
    with (
        pytest.warns(DeprecationWarning),
        pytest.raises(
            ImportError,
            match=r"\./packages/store-sqlite.*pip install agent-channel-sqlite",
        ),
    ):
        from agent_channel import SqliteStore  # noqa: F401


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    with pytest.raises(AttributeError):
        _ = agent_channel.no_such_name  # pyright: ignore[reportAttributeAccessIssue]
