"""Write each package's table of lazily loaded names from its ``if TYPE_CHECKING:`` block.

    uv run python scripts/gen_names.py           # rewrite every stale table
    uv run python scripts/gen_names.py --check   # change nothing; exit 1 naming stale files

A package's public names are listed once, as the ``from .module import Name as Name`` lines of
the ``if TYPE_CHECKING:`` block of its ``__init__.py``: what type checkers and IDEs read. The
runtime cannot read that block without parsing the file at every import (anyio does; it would
cost more than the whole import of ``agent_channel``), so the ``else:`` branch holds the same
list as a name-to-module table between two marker lines, written here. ``__all__``, ``__dir__``
and the lazy ``__getattr__`` are derived from that table. It also names what the user's pages
use from a private module that the block does not list. The packages' tests fail while a
table is stale or a name is missing. Stdlib only.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = (
    ROOT / "packages/channel-core/src/agent_channel/__init__.py",
    ROOT / "packages/acp-producer/src/agent_channel_acp/__init__.py",
    ROOT / "packages/ray-runtime/src/agent_channel_ray/__init__.py",
    ROOT / "packages/pydantic-ai-adapter/src/agent_channel_pydantic_ai/__init__.py",
    ROOT / "packages/openai-agents-adapter/src/agent_channel_openai_agents/__init__.py",
    ROOT / "packages/langgraph-adapter/src/agent_channel_langgraph/__init__.py",
)
# The pages a user of the packages reads (not decisions.md, architecture.md: the insides).
USER_DOCS = (
    "packages/*/README.md",
    "docs/index.md",
    "docs/concepts.md",
    "docs/quickstart-*.md",
    "docs/cli.md",
    "docs/api/*.md",
    "docs/examples/*.py",
)
BEGIN = "# <names> written by scripts/gen_names.py from the block above: edit that, then run it"
END = "# </names>"
_API_SECTION = re.compile(r"^<!-- api\n.*?^<!-- /api -->$", re.M | re.S)


def listed(source: str) -> dict[str, str]:
    """Each name the ``if TYPE_CHECKING:`` block imports, with its module (``_channel``)."""
    homes: dict[str, str] = {}
    for node in ast.parse(source).body:
        if not (isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"):
            continue
        for stmt in node.body:
            if not (isinstance(stmt, ast.ImportFrom) and stmt.level == 1 and stmt.module):
                raise ValueError(f"line {stmt.lineno}: only 'from .module import X as X' here")
            for alias in stmt.names:
                if alias.asname != alias.name:  # a type checker re-exports only 'X as X'
                    raise ValueError(f"line {stmt.lineno}: write '{alias.name} as {alias.name}'")
                if alias.name in homes:
                    raise ValueError(f"line {stmt.lineno}: {alias.name} is listed twice")
                homes[alias.name] = stmt.module
        return homes
    raise ValueError("no 'if TYPE_CHECKING:' block")


def render(source: str) -> str:
    """The file with its table rewritten from its block."""
    lines = source.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.strip() == BEGIN]
    ends = [i for i, line in enumerate(lines) if line.strip() == END]
    if len(starts) != 1 or len(ends) != 1 or ends[0] < starts[0]:
        raise ValueError(f"want one '{BEGIN}' line, then one '{END}' line")
    indent = lines[starts[0]][: len(lines[starts[0]]) - len(lines[starts[0]].lstrip())]
    table = [f"{indent}_HOME = {{\n"]
    table += [f'{indent}    "{name}": "{module}",\n' for name, module in listed(source).items()]
    table.append(f"{indent}}}\n")
    return "".join([*lines[: starts[0] + 1], *table, *lines[ends[0] :]])


def unlisted(init: Path) -> list[str]:
    """Names a private module defines and the user's pages use, but the block does not list.

    Used means: imported from the package in an example, written ``package.Name`` there or in
    the package's docstrings, or in a code span as a class (``AgentRef``; a bare ``name()`` is
    as often a method or a verb as a function). An API page's generated text (its signatures
    and docstrings, between ``<!-- api`` and ``<!-- /api -->``) is the sources', not a page's.
    """
    package = init.parent.name
    defined: set[str] = set()
    for path in init.parent.glob("_*.py"):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                defined.add(node.name)
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                defined.update(t.id for t in targets if isinstance(t, ast.Name))
    pages = "\n".join(
        _API_SECTION.sub("", p.read_text(encoding="utf-8"))
        for pattern in USER_DOCS
        for p in sorted(ROOT.glob(pattern))
    )
    sources = "\n".join(p.read_text(encoding="utf-8") for p in init.parent.rglob("*.py"))
    used = set(re.findall(rf"\b{package}\.([A-Za-z]\w*)", pages + sources))
    for m in re.finditer(rf"^\s*from {package} import (\([^)]*\)|[^\n]*)", pages, re.M):
        used.update(re.findall(r"\w+", m.group(1)))
    for span in re.findall(r"`([^`\n]+)`", pages):
        used.update(re.findall(r"\b[A-Z]\w*[a-z]\w*", span))
    public = set(listed(init.read_text(encoding="utf-8")))
    # the package's public modules and subpackages (``agent_channel.children``) are no names
    public |= {p.stem for p in init.parent.iterdir() if not p.name.startswith("_")}
    return sorted(name for name in used & defined - public if not name.startswith("_"))


def stale_files() -> dict[Path, str]:
    """Each ``__init__.py`` whose table differs from its block, with the fresh text."""
    stale: dict[Path, str] = {}
    for path in PACKAGES:
        text = path.read_text(encoding="utf-8")
        fresh = render(text)
        if fresh != text:
            stale[path] = fresh
    return stale


def main(argv: list[str]) -> int:
    check = argv == ["--check"]
    if argv and not check:
        print("usage: gen_names.py [--check]", file=sys.stderr)
        return 2
    missing = {p: names for p in PACKAGES if (names := unlisted(p))}
    for path, names in missing.items():
        print(f"{path.relative_to(ROOT)}: the pages use {', '.join(names)}; list them in the block")
    stale = stale_files()
    for path, fresh in stale.items():
        name = path.relative_to(ROOT)
        if check:
            print(f"{name}: stale (run: uv run python scripts/gen_names.py)")
        else:
            path.write_text(fresh, encoding="utf-8")
            print(f"{name}: regenerated")
    return 1 if missing or (check and stale) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
