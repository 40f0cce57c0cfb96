"""The public names are listed once, in ``__init__.py``'s ``if TYPE_CHECKING:`` block.

The run-time table (written from the block by ``scripts/gen_names.py``) drives the lazy
loading, ``__all__`` and ``dir()``; each check runs in a fresh interpreter, where nothing is
loaded yet, so the order of the tests does not matter.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import agent_channel

ROOT = Path(__file__).resolve().parents[3]
INIT = Path(agent_channel.__file__)


def gen_names() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_names", ROOT / "scripts/gen_names.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_fresh(code: str) -> Any:
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.splitlines()[-1])


def test_the_run_time_table_is_the_block() -> None:
    source = INIT.read_text(encoding="utf-8")
    assert gen_names().render(source) == source, "stale: run uv run python scripts/gen_names.py"


def test_a_name_added_to_the_block_alone_is_caught() -> None:
    gen = gen_names()
    source = INIT.read_text(encoding="utf-8")
    added = source.replace(
        "    from ._regions import Region as Region\n",
        "    from ._regions import Region as Region\n    from ._regions import Spare as Spare\n",
    )
    assert '"Spare": "_regions"' in gen.render(added) != added
    plain = source.replace("import Region as Region\n", "import Region\n")
    try:
        gen.listed(plain)
    except ValueError as e:  # without 'as Region' a type checker would not re-export it
        assert "write 'Region as Region'" in str(e)
    else:
        raise AssertionError("a plain import was accepted")


def test_every_listed_name_resolves_to_its_module_and_is_in_all_and_dir() -> None:
    listed = gen_names().listed(INIT.read_text(encoding="utf-8"))
    code = f"""
import importlib, json
import agent_channel
listed = {listed!r}
wrong = [n for n, m in listed.items()
         if getattr(agent_channel, n) is not getattr(
             importlib.import_module("agent_channel." + m), n)]
print(json.dumps([wrong, agent_channel.__all__, dir(agent_channel)]))
"""
    wrong, public, shown = run_fresh(code)
    assert wrong == []
    assert public == sorted(listed)
    assert set(listed) <= set(shown)


def test_what_the_pages_use_from_a_private_module_is_listed() -> None:
    assert gen_names().unlisted(INIT) == []


def test_public_classes_and_functions_say_the_package_where_hints_still_resolve() -> None:
    code = """
import json, types, typing
import agent_channel
out = {}
for name in agent_channel.__all__:
    value = getattr(agent_channel, name)
    if isinstance(value, type | types.FunctionType):
        own = isinstance(value, type) and "__annotations__" in vars(value)
        if isinstance(value, type) and value.__module__ == "agent_channel":
            typing.get_type_hints(value)  # a class's are read in the module it names
        out[name] = [value.__module__, own]
print(json.dumps(out))
"""
    found = run_fresh(code)
    assert found["AgentRef"] == ["agent_channel", False]
    assert found["open_channel"] == ["agent_channel", False]
    assert found["ChannelFull"] == ["agent_channel", False]
    # A model keeps its module: typing.get_type_hints evaluates its annotations there.
    assert found["UserMessage"] == ["agent_channel._items", True]
    assert {name for name, (home, own) in found.items() if home != "agent_channel"} == {
        name for name, (_, own) in found.items() if own
    }
