"""The layering contracts in importlinter.toml hold, and they can actually fail."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "importlinter.toml"
SOURCES = {
    "agent_channel": ROOT / "packages/channel-core/src/agent_channel",
    "agent_channel_react": ROOT / "packages/react-consumer/src/agent_channel_react",
    "agent_channel_acp": ROOT / "packages/acp-producer/src/agent_channel_acp",
    "agent_channel_ray": ROOT / "packages/ray-runtime/src/agent_channel_ray",
    "agent_channel_sqlite": ROOT / "packages/store-sqlite/src/agent_channel_sqlite",
    "agent_channel_pydantic_ai": ROOT
    / "packages/pydantic-ai-adapter/src/agent_channel_pydantic_ai",
    "agent_channel_openai_agents": ROOT
    / "packages/openai-agents-adapter/src/agent_channel_openai_agents",
    "agent_channel_langgraph": ROOT / "packages/langgraph-adapter/src/agent_channel_langgraph",
}


def _lint_imports() -> str:
    """The lint-imports of the interpreter running the tests (the workspace venv)."""
    candidate = Path(sys.executable).parent / "lint-imports"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("lint-imports")
    assert found, "lint-imports is not installed (uv sync installs it with the dev group)"
    return found


def _contract_names() -> dict[str, str]:
    config = tomllib.loads(CONFIG.read_text())
    return {c["id"]: c["name"] for c in config["tool"]["importlinter"]["contracts"]}


def _run(cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    # Wide enough that no contract name or import chain is wrapped across lines.
    env = {**(os.environ if env is None else env), "COLUMNS": "300"}
    return subprocess.run(
        [_lint_imports(), "--no-cache", str(CONFIG)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_layering_contracts_are_kept() -> None:
    result = _run(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Warning" not in result.stdout + result.stderr, result.stderr
    for name in _contract_names().values():
        assert f"{name} KEPT" in result.stdout


@pytest.mark.parametrize(
    ("package", "violation", "forbidden", "broken"),
    [
        # The producer imports the SQLite store: the core now reaches sqlite3 indirectly too.
        (
            "agent_channel",
            "import agent_channel_acp",
            "agent_channel_acp",
            {"core-standalone"},
        ),
        # anthropic is not installed: an absent forbidden SDK must still be caught.
        ("agent_channel", "import anthropic.types", "anthropic", {"core-standalone"}),
        (
            "agent_channel_react",
            "from agent_channel_acp import x",
            "agent_channel_acp",
            # Not acp too: the producer's front imports its modules lazily (run time is
            # what counts; imports for type checkers are left out of the graph).
            {"consumer-producer-independent"},
        ),
        ("agent_channel_react", "import acp", "acp", {"only-producer-imports-acp"}),
        # The producer's own layers: each inner contract, broken once.
        (
            "agent_channel_acp.wire",
            "from agent_channel_acp.stream import _outbox",
            "agent_channel_acp.stream._outbox",
            {"producer-layers"},
        ),
        (
            "agent_channel_acp.stream",
            "from agent_channel_acp.agent import _finished",
            "agent_channel_acp.agent._finished",
            {"producer-layers"},
        ),
        (
            "agent_channel_acp.hosting",
            "from agent_channel_acp.operator import _script",
            "agent_channel_acp.operator._script",
            {"producer-layers"},
        ),
        (
            "agent_channel_acp.agent.stdio",
            "from agent_channel_acp.agent.attach import _picker",
            "agent_channel_acp.agent.attach._picker",
            {"modes-independent"},
        ),
        (
            "agent_channel_acp.operator",
            "from agent_channel_acp.stream import _outbox",
            "agent_channel_acp.stream._outbox",
            {"operator-speaks-the-wire"},
        ),
        ("agent_channel_acp.wire", "import acp", "acp", {"wire-and-verbs-light"}),
        # The Ray package (issue 20): the core imports no ray; it and the producer, it and
        # the consumer, never import each other.
        ("agent_channel", "import ray", "ray", {"core-standalone"}),
        (
            "agent_channel_acp",
            "import agent_channel_ray",
            "agent_channel_ray",
            {"producer-ray-independent"},
        ),
        (
            "agent_channel_ray",
            "import agent_channel_react",
            "agent_channel_react",
            {"consumer-ray-independent"},
        ),
        # The SQLite store (its own distribution): the core never imports sqlite3 (the
        # store imports it, so it is in the graph) nor the store; the store, no producer,
        # consumer or Ray.
        ("agent_channel", "import sqlite3", "sqlite3", {"core-no-sqlite"}),
        (
            "agent_channel",
            "import agent_channel_sqlite",
            "agent_channel_sqlite",
            {"core-standalone", "core-no-sqlite"},
        ),
        (
            "agent_channel_sqlite",
            "import agent_channel_acp",
            "agent_channel_acp",
            {"sqlite-store-standalone"},
        ),
        ("agent_channel_sqlite", "import ray", "ray", {"sqlite-store-standalone"}),
        # Framework adapters (issue 30): found by entry point, built on the core alone.
        (
            "agent_channel_pydantic_ai",
            "import agent_channel_acp",
            "agent_channel_acp",
            {"adapters-standalone"},
        ),
        (
            "agent_channel_pydantic_ai",
            "from agent_channel_react import react",
            "agent_channel_react",
            {"adapters-standalone"},
        ),
        (
            "agent_channel_acp.cli",
            "import agent_channel_pydantic_ai",
            "agent_channel_pydantic_ai",
            {"nothing-imports-an-adapter"},
        ),
        (
            "agent_channel",
            "import pydantic_ai",
            "pydantic_ai",
            {"core-standalone", "nothing-imports-an-adapter"},
        ),
        (
            "agent_channel_openai_agents",
            "import agent_channel_acp",
            "agent_channel_acp",
            {"adapters-standalone"},
        ),
        (
            "agent_channel_openai_agents",
            "import agent_channel_pydantic_ai",
            "agent_channel_pydantic_ai",
            {"adapters-independent"},
        ),
        (
            "agent_channel_acp.cli",
            "import agent_channel_openai_agents",
            "agent_channel_openai_agents",
            {"nothing-imports-an-adapter"},
        ),
        (
            "agent_channel",
            "import agents",
            "agents",
            {"core-standalone", "nothing-imports-an-adapter"},
        ),
        (
            "agent_channel_langgraph",
            "from agent_channel_react import react",
            "agent_channel_react",
            {"adapters-standalone"},
        ),
        (
            "agent_channel_langgraph",
            "import agent_channel_openai_agents",
            "agent_channel_openai_agents",
            {"adapters-independent"},
        ),
        (
            "agent_channel_acp.cli",
            "import agent_channel_langgraph",
            "agent_channel_langgraph",
            {"nothing-imports-an-adapter"},
        ),
        (
            "agent_channel",
            "import langgraph",
            "langgraph",
            {"core-standalone", "nothing-imports-an-adapter"},
        ),
    ],
)
def test_a_violation_breaks_its_contract(
    tmp_path: Path, package: str, violation: str, forbidden: str, broken: set[str]
) -> None:
    # Copy the source trees outside the repo and add one violating module there;
    # PYTHONPATH puts the copies ahead of the editable installs.
    for name, src in SOURCES.items():
        shutil.copytree(src, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / package.replace(".", "/") / "_layering_violation.py").write_text(violation + "\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path), env.get("PYTHONPATH")]))

    result = _run(tmp_path, env)

    assert result.returncode != 0, result.stdout + result.stderr
    assert f"{package}._layering_violation -> {forbidden}" in result.stdout
    for contract_id, name in _contract_names().items():
        status = "BROKEN" if contract_id in broken else "KEPT"
        assert f"{name} {status}" in result.stdout, result.stdout


def test_the_kernel_importing_children_breaks_its_contract(tmp_path: Path) -> None:
    """The kernel's contract lists its modules: one of them importing children breaks it."""
    for name, src in SOURCES.items():
        shutil.copytree(src, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    kernel = tmp_path / "agent_channel/_vars.py"
    kernel.write_text(kernel.read_text() + "\nfrom agent_channel.children import _supervisor\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path), env.get("PYTHONPATH")]))

    result = _run(tmp_path, env)

    assert result.returncode != 0, result.stdout + result.stderr
    names = _contract_names()
    assert f"{names['kernel-knows-no-extension']} BROKEN" in result.stdout, result.stdout
    assert "agent_channel._vars -> agent_channel.children._supervisor" in result.stdout


def test_the_kernel_contract_lists_every_private_module_of_the_core() -> None:
    config = tomllib.loads(CONFIG.read_text())
    contract = next(
        c
        for c in config["tool"]["importlinter"]["contracts"]
        if c["id"] == "kernel-knows-no-extension"
    )
    core = SOURCES["agent_channel"]
    private = {f"agent_channel.{p.stem}" for p in core.glob("_*.py") if p.name != "__init__.py"}
    assert private <= set(contract["source_modules"])
