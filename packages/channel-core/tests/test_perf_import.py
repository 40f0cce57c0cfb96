"""``import agent_channel`` defines no model: every public name loads its module when first used.

The import checks run in a fresh interpreter, since a module is imported once per process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import agent_channel
import pytest


def run_fresh(code: str) -> Any:
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.splitlines()[-1])


LOADED = """
import json, sys
def loaded():
    return sorted(m for m in ("agent_channel._events", "agent_channel._items", "pydantic.main")
                  if m in sys.modules)
"""


def test_importing_the_package_imports_no_pydantic_model_machinery() -> None:
    assert run_fresh(LOADED + "import agent_channel\nprint(json.dumps(loaded()))") == []


def test_a_turn_nobody_observes_needs_no_event_model() -> None:
    code = (
        LOADED
        + """
import anyio
from agent_channel import UserMessage, open_channel

async def turn(observed):
    async with open_channel() as ch:
        ref = ch.ref()
        if observed:
            ref.subscribe(lambda e: None)
        ref.post(UserMessage("hi"))
        ch.drain()
        with ch.scope():
            await anyio.lowlevel.checkpoint()
        ref.interrupt()

anyio.run(turn, False)
before = loaded()
anyio.run(turn, True)
print(json.dumps([before, loaded()]))
"""
    )
    unobserved, observed = run_fresh(code)
    assert unobserved == ["agent_channel._items", "pydantic.main"]
    assert observed == ["agent_channel._events", "agent_channel._items", "pydantic.main"]


def test_every_public_name_resolves_and_dir_lists_it() -> None:
    for name in agent_channel.__all__:
        assert getattr(agent_channel, name) is not None, name
    assert set(agent_channel.__all__) <= set(dir(agent_channel))
    assert sorted(agent_channel._HOME) == sorted(agent_channel.__all__)  # pyright: ignore[reportPrivateUsage]


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        agent_channel.Nope  # type: ignore[attr-defined]  # noqa: B018  # pyright: ignore[reportAttributeAccessIssue]


def test_star_import_and_help_see_every_public_name() -> None:
    code = """
import io, json, pydoc
ns = {}
exec("from agent_channel import *", ns)
import agent_channel
text = pydoc.render_doc(agent_channel, renderer=pydoc.plaintext)
print(json.dumps([sorted(n for n in ns if not n.startswith("__")), sorted(agent_channel.__all__),
                  text]))
"""
    star, public, text = run_fresh(code)
    assert star == public
    for needle in ("class AgentChannel", "class UserMessage", "class TurnStarted", "open_channel("):
        assert needle in text, needle
    assert "talk to a running agent" in text
