"""The producer's public names are listed once, in ``__init__.py``'s ``if TYPE_CHECKING:`` block.

The run-time table (written from the block by ``scripts/gen_names.py``) drives the lazy
loading, ``__all__`` and ``dir()``; the checks of loading run in a fresh interpreter.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import agent_channel_acp

ROOT = Path(__file__).resolve().parents[2]
INIT = Path(agent_channel_acp.__file__)


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


def test_every_listed_name_resolves_to_its_module_and_is_in_all_and_dir() -> None:
    listed = gen_names().listed(INIT.read_text(encoding="utf-8"))
    code = f"""
import importlib, json, sys
import agent_channel_acp as p
listed = {listed!r}
cheap = "acp" not in sys.modules
wrong = [n for n, m in listed.items()
         if getattr(p, n) is not getattr(importlib.import_module("agent_channel_acp." + m), n)]
print(json.dumps([cheap, wrong, p.__all__, dir(p), p.__version__]))
"""
    cheap, wrong, public, shown, version = run_fresh(code)
    assert cheap  # importing the package loads no SDK
    assert wrong == []
    assert public == sorted([*listed, "__version__"])
    assert set(public) <= set(shown)
    assert version == agent_channel_acp.__version__


def test_an_unknown_name_is_an_attribute_error() -> None:
    code = """
import json
import agent_channel_acp
try:
    agent_channel_acp.Nope
except AttributeError as e:
    print(json.dumps(str(e)))
"""
    assert run_fresh(code) == "module 'agent_channel_acp' has no attribute 'Nope'"


def test_what_the_pages_use_from_a_private_module_is_listed() -> None:
    assert gen_names().unlisted(INIT) == []


def test_public_functions_say_the_package() -> None:
    code = """
import json
import agent_channel_acp as p
print(json.dumps({n: getattr(p, n).__module__ for n in ("attachable", "host", "Attachable")}))
"""
    assert set(run_fresh(code).values()) == {"agent_channel_acp"}
