"""The PostgreSQL store is built on the core's public names and seam only (import-linter cannot
say "no private module of a package" in one rule: this test reads the imports)."""

from __future__ import annotations

import ast
from pathlib import Path

SOURCES = Path(__file__).resolve().parents[1] / "src" / "agent_channel_postgres"


def _imports(tree: ast.AST) -> list[str]:
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found += [node.module] + [f"{node.module}.{a.name}" for a in node.names]
    return found


def test_the_store_imports_nothing_private_of_the_core() -> None:
    modules = sorted(SOURCES.glob("*.py"))
    assert len(modules) >= 3
    private = [
        f"{path.name}: {name}"
        for path in modules
        for name in _imports(ast.parse(path.read_text()))
        if name.startswith("agent_channel.") and any(p.startswith("_") for p in name.split(".")[1:])
    ]
    assert private == []


def test_the_check_sees_a_private_import() -> None:
    tree = ast.parse("from agent_channel._codec import items\nimport agent_channel._store\n")
    assert "agent_channel._codec" in _imports(tree)
    assert "agent_channel._store" in _imports(tree)
