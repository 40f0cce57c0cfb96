"""The kernel's shape, read from the code (issue 28): small modules, imports one way, no
private reaches from outside the kernel. Each check names what breaks it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "packages/channel-core/src/agent_channel"
MAX_LINES = 450
EXTENSIONS = ("children", "questions")
"""Core subpackages built on the public names and the seam alone."""
SEAM = {"agent_channel", "agent_channel.lowlevel", "agent_channel.abc"}
"""What code outside the kernel may import of the core."""


def _module(path: Path) -> str:
    src = next(a for a in path.parents if a.name == "src")
    parts = path.relative_to(src).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _runtime_imports(path: Path) -> list[tuple[int, str]]:
    """Every module ``path`` imports at run time (function-level included), absolute;
    imports under ``if TYPE_CHECKING:`` left out."""
    tree = ast.parse(path.read_text())
    package = _module(path) if path.name == "__init__.py" else _module(path).rpartition(".")[0]
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            skipped.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.append((node.lineno, base))
            # `from . import x` / `from .pkg import sub`: a submodule named like an attribute
            found += [(node.lineno, f"{base}.{a.name}") for a in node.names]
    return found


def _core_files() -> list[Path]:
    return sorted(p for p in CORE.rglob("*.py") if "__pycache__" not in p.parts)


def _other_sources() -> list[Path]:
    return sorted(
        p
        for p in (ROOT / "packages").glob("*/src/**/*.py")
        if "__pycache__" not in p.parts and not p.is_relative_to(CORE)
    )


def test_no_core_module_is_over_the_limit() -> None:
    long = {
        str(p.relative_to(CORE)): n
        for p in _core_files()
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"core modules over {MAX_LINES} lines: {long}"


def test_no_core_module_switches_the_private_usage_check_off() -> None:
    off = [
        str(p.relative_to(CORE))
        for p in _core_files()
        if "reportPrivateUsage=false" in p.read_text()
    ]
    assert not off, f"file-wide reportPrivateUsage=false in {off}"


def test_the_core_imports_no_sqlite3() -> None:
    found = [
        f"{p.relative_to(CORE)}:{line}"
        for p in _core_files()
        for line, name in _runtime_imports(p)
        if name.split(".")[0] == "sqlite3"
    ]
    assert not found, f"sqlite3 imported in the core: {found}"


def _graph() -> dict[str, set[str]]:
    modules = {_module(p): p for p in _core_files()}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        graph[name] = {m for _, m in _runtime_imports(path) if m in modules and m != name}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_core_modules_import_each_other_one_way() -> None:
    cycle = _cycle(_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_cycle_check_finds_a_cycle() -> None:
    graph = _graph()
    graph["agent_channel._items"].add("agent_channel._events")  # _events imports _items
    assert _cycle(graph) is not None


def test_the_kernel_imports_no_extension() -> None:
    graph = _graph()
    kernel = [m for m in graph if not any(m.startswith(f"agent_channel.{e}") for e in EXTENSIONS)]
    reach = {
        m: sorted(
            t for t in graph[m] if any(t.startswith(f"agent_channel.{e}") for e in EXTENSIONS)
        )
        for m in kernel
    }
    assert not {m: t for m, t in reach.items() if t}


def _private_core_imports(paths: list[Path], allowed_prefix: str | None = None) -> list[str]:
    bad: list[str] = []
    for path in paths:
        for line, name in _runtime_imports(path) + _type_checking_imports(path):
            if not name.startswith("agent_channel.") and name != "agent_channel":
                continue
            if allowed_prefix and name.startswith(allowed_prefix):
                continue
            if name not in SEAM and any(part.startswith("_") for part in name.split(".")[1:]):
                bad.append(f"{path.relative_to(ROOT)}:{line} {name}")
    return bad


def _type_checking_imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text())
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for stmt in node.body:
                if isinstance(stmt, ast.ImportFrom) and stmt.level == 0 and stmt.module:
                    out.append((stmt.lineno, stmt.module))
                    out += [(stmt.lineno, f"{stmt.module}.{a.name}") for a in stmt.names]
    return out


def test_other_distributions_import_nothing_private_of_the_core() -> None:
    bad = [b for b in _private_core_imports(_other_sources()) if ".agent_channel_" not in b]
    assert not bad, f"private core modules imported: {bad}"


@pytest.mark.parametrize("extension", EXTENSIONS)
def test_extensions_import_only_public_names_and_the_seam(extension: str) -> None:
    files = sorted((CORE / extension).rglob("*.py"))
    bad = _private_core_imports(files, allowed_prefix=f"agent_channel.{extension}.")
    assert not bad, f"{extension} imports private core modules: {bad}"


def _private_names() -> set[str]:
    """The private attributes the core's classes define (their slots and methods)."""
    names: set[str] = set()
    for path in _core_files():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                        names.add(item.name)
                    elif (
                        isinstance(item, ast.Assign) and ast.unparse(item.targets[0]) == "__slots__"
                    ):
                        value = ast.literal_eval(item.value)
                        names.update(value if isinstance(value, tuple) else ())
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


# A core object's private attribute, read or written on a name that holds one.
_HOLDERS = r"(?:ref|channel|ch|sup|supervisor|self\._channel)"


def _reaches(paths: list[Path]) -> list[str]:
    private = _private_names()
    found: list[str] = []
    for path in paths:
        for i, line in enumerate(path.read_text().splitlines(), 1):
            for m in re.finditer(rf"\b{_HOLDERS}\.(_[a-z]\w*)\b", line):
                if m.group(1) in private:
                    found.append(f"{path.relative_to(ROOT)}:{i} {m.group(0)}")
    return found


def test_other_distributions_touch_no_private_attribute_of_a_core_object() -> None:
    found = _reaches(_other_sources())
    assert not found, f"private reaches: {found}"


def test_extensions_touch_no_private_attribute_of_a_kernel_object() -> None:
    files = [p for e in EXTENSIONS for p in sorted((CORE / e).rglob("*.py"))]
    kernel_private = _private_names() - {
        n
        for e in EXTENSIONS
        for p in (CORE / e).rglob("*.py")
        for n in re.findall(r"def (_\w+)|\"(_\w+)\"", p.read_text())
        for n in n
        if n
    }
    found = [r for r in _reaches(files) if r.rsplit(".", 1)[-1] in kernel_private]
    assert not found, f"private reaches into the kernel: {found}"


def test_the_reach_check_sees_one() -> None:
    sample = ROOT / "packages/ray-runtime/src/agent_channel_ray/_routes.py"
    text = sample.read_text() + "\nx = ref._channel\n"
    private = _private_names()
    hits = [
        m.group(1)
        for m in re.finditer(rf"\b{_HOLDERS}\.(_[a-z]\w*)\b", text)
        if m.group(1) in private
    ]
    assert hits == ["_channel"]
