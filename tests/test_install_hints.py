"""Every install hint names a command that works today, from a clone of the repository.

None of the packages is on an index yet, so ``pip install agent-channel-acp`` fails. The
rule, over every string literal and comment of ``packages/*/src/**/*.py`` (a docstring or a
message is read as text) and every paragraph of ``README.md``, ``packages/*/README.md`` and
``docs/*.md`` (``decisions.md`` is a record of past choices, ``release.md`` checks an upload
by name; a Markdown code block is one paragraph whose lines are commands each):

1. An install command (``pip install``, ``uv pip install``, ``uv add``, ``uv tool install``,
   ``pipx install``, ``uvx --from``) that names one of the workspace's distributions by name
   (``'agent-channel-acp[remote]'``) stands only in a paragraph that says "once published"
   and holds a from-clone command installing that distribution with those extras.
2. A from-clone command is an install command naming a folder (``'./packages/NAME[EXTRAS]'``,
   run at the clone's root): the folder holds a workspace package, each extra is one of its
   ``[project.optional-dependencies]``, and every workspace distribution the named packages
   need (their dependencies and those of the extras named, transitively, as the pyprojects
   say) is named in the same command: no index has them.
3. No install command in the source takes its arguments from an f-string field: a hint is
   spelled out, so this test reads it.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
SKIPPED_PAGES = {"decisions.md", "release.md"}
MARKER = "once published"
FIELD = "\0"
"""What an f-string field reads as (rule 3)."""

COMMAND = re.compile(
    r"\b(?:pip3?\s+install|uv\s+add|uv\s+tool\s+install|pipx\s+install|(?P<uvx>uvx))(?=\s|$)"
)
TOKEN = re.compile(r"""\s*('[^']*'|"[^"]*"|[^\s'"`#;|&()<>]+)""")
TAKES_REQUIREMENT = {"-e", "--editable", "--from", "--with", "--with-editable"}
REQUIREMENT = re.compile(
    r"^(?P<target>[^\s\[\]]+?)(?:\[(?P<extras>[^\]]*)\])?(?P<spec>[<>=!~].*)?$"
)


@dataclass(frozen=True)
class Package:
    name: str
    folder: Path
    extras: frozenset[str]
    needs: dict[str | None, list[Requirement]]
    """The requirements of the package (key ``None``) and of each extra."""


def _workspace() -> dict[str, Package]:
    """The workspace's packages by distribution name, from their pyprojects."""
    found = {}
    for pyproject in sorted(ROOT.glob("packages/*/pyproject.toml")):
        project = tomllib.loads(pyproject.read_text())["project"]
        extras = project.get("optional-dependencies", {})
        needs: dict[str | None, list[Requirement]] = {
            None: [Requirement(r) for r in project.get("dependencies", [])]
        }
        needs.update({e: [Requirement(r) for r in rs] for e, rs in extras.items()})
        name = canonicalize_name(project["name"])
        found[name] = Package(name, pyproject.parent.resolve(), frozenset(extras), needs)
    return found


WORKSPACE = _workspace()


@dataclass(frozen=True)
class Install:
    """One requirement an install command names: a distribution or a folder, with extras."""

    target: str
    extras: frozenset[str]

    @property
    def is_path(self) -> bool:
        return self.target.startswith((".", "/", "~")) or "/" in self.target


def _requirement(token: str) -> Install | None:
    match = REQUIREMENT.match(token)
    if match is None:
        return None
    extras = {e.strip() for e in (match["extras"] or "").split(",") if e.strip()}
    return Install(match["target"], frozenset(extras))


def commands(text: str) -> Iterator[tuple[str, list[Install]]]:
    """Each install command in one line of a command (or a paragraph of prose): its text and
    the requirements it names. Its arguments end at what ends a shell word list or a code
    span (a backtick, ``#``, ``;``, a parenthesis) or at a word no requirement looks like."""
    for found in COMMAND.finditer(text):
        at, installs, wants, uvx = found.end(), [], False, bool(found["uvx"])
        # uvx installs what --from and --with name, and the program it runs unless --from
        # names where it comes from; the program's arguments are not installed.
        program_from = False
        while token := TOKEN.match(text, at):
            at, word = token.end(), token[1]
            quoted = word[0] in "'\""
            word = word[1:-1] if quoted else word.rstrip(".,:")
            if word.startswith("-"):
                wants = word in TAKES_REQUIREMENT
                program_from |= word == "--from"
                continue
            install = _requirement(word)
            if install is None:
                break
            if uvx and not wants:
                if not program_from:
                    installs.append(install)
                break
            installs.append(install)
            wants = False
        yield text[found.start() : at].strip(), installs


def _by_folder() -> dict[Path, Package]:
    return {p.folder: p for p in WORKSPACE.values()}


def _needed(package: Package, extras: frozenset[str]) -> set[str]:
    """The workspace distributions ``package`` with ``extras`` installs, itself excluded."""
    needed: set[str] = set()
    todo = [(package, extras)]
    while todo:
        current, chosen = todo.pop()
        for key in (None, *sorted(chosen)):
            for requirement in current.needs.get(key, []):
                name = canonicalize_name(requirement.name)
                if name in WORKSPACE and name not in needed:
                    needed.add(name)
                    todo.append((WORKSPACE[name], frozenset(requirement.extras)))
    needed.discard(package.name)
    return needed


def clone_problems(installs: list[Install]) -> tuple[list[str], set[tuple[str, str]]]:
    """Rule 2 for one command naming folders: what is wrong with it, and the (distribution,
    extra) pairs it installs (extra ``""`` for the package itself)."""
    problems, provides, named = [], set(), set()
    folders = _by_folder()
    chosen = []
    for install in installs:
        if not install.is_path:
            continue
        folder = (ROOT / install.target).resolve()
        package = folders.get(folder)
        if package is None:
            problems.append(f"{install.target} is not a workspace package's folder")
            continue
        unknown = install.extras - package.extras
        if unknown:
            problems.append(
                f"{install.target}: no extra {', '.join(sorted(unknown))} "
                f"(its extras: {', '.join(sorted(package.extras)) or 'none'})"
            )
        named.add(package.name)
        chosen.append((install, package))
        provides |= {(package.name, "")} | {(package.name, e) for e in install.extras}
    for install, package in chosen:
        for missing in sorted(_needed(package, install.extras) - named):
            problems.append(
                f"{install.target} needs {missing}, which no index has: name "
                f"./{WORKSPACE[missing].folder.relative_to(ROOT)} in the same command"
            )
    return problems, provides


def paragraph_problems(lines: list[str]) -> list[str]:
    """Rules 1 to 3 for one paragraph, given as its command lines (one line of prose each
    paragraph of text, one per line of a code block)."""
    problems, by_name, provided = [], [], set()
    for line in lines:
        for text, installs in commands(line):
            if any(FIELD in i.target for i in installs):
                problems.append(f"`{text}` is built at run time: spell the command out")
                continue
            for install in installs:
                if not install.is_path and canonicalize_name(install.target) in WORKSPACE:
                    by_name.append((text, install))
            if any(i.is_path for i in installs):
                wrong, provides = clone_problems(installs)
                problems += [f"`{text}`: {w}" for w in wrong]
                provided |= provides
    said = any(MARKER in line.lower() for line in lines)
    for text, install in by_name:
        name = canonicalize_name(install.target)
        wanted = {(name, "")} | {(name, e) for e in install.extras}
        if not said or not wanted <= provided:
            problems.append(
                f"`{text}` installs {install.target} from an index, which has none of ours "
                f"yet: give the from-clone command (pip install ./packages/...), naming the "
                f"distribution only beside it, '{MARKER}'"
            )
    return problems


def markdown_paragraphs(text: str) -> Iterator[tuple[int, list[str]]]:
    """A page's paragraphs (first line number, command lines): a run of non-blank lines,
    joined into one (quote marks and indents dropped), or a fenced code block, line by line."""
    start, prose, fence, block = 0, [], None, []
    for n, raw in enumerate([*text.splitlines(), ""], 1):
        line = raw.strip()
        if fence is not None:
            if line.startswith(fence):
                yield start, block
                fence = None
            else:
                block.append(line)
            continue
        if line.startswith(("```", "~~~")) or not line:
            if prose:
                yield start, [" ".join(prose)]
                prose = []
            if line:
                fence, block, start = line[:3], [], n
            continue
        if not prose:
            start = n
        prose.append(line.lstrip("> ").strip())


def _strings(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Each string literal's text (an f-string's fields read as ``FIELD``)."""
    inner = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    for node in ast.walk(tree):
        if id(node) in inner:
            continue
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.lineno, node.value
        elif isinstance(node, ast.JoinedStr):
            parts = [v.value if isinstance(v, ast.Constant) else FIELD for v in node.values]
            yield node.lineno, "".join(str(p) for p in parts)


def python_paragraphs(text: str) -> Iterator[tuple[int, list[str]]]:
    """A source file's paragraphs: each string literal's (a docstring's, a message's) and
    each comment, as prose."""
    for lineno, value in _strings(ast.parse(text)):
        for paragraph in re.split(r"\n\s*\n", value):
            yield lineno, [" ".join(line.strip() for line in paragraph.splitlines())]
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], [token.string]


def sources() -> list[Path]:
    pages = [ROOT / "README.md", *sorted(ROOT.glob("packages/*/README.md"))]
    pages += [p for p in sorted(ROOT.glob("docs/*.md")) if p.name not in SKIPPED_PAGES]
    return pages + sorted(ROOT.glob("packages/*/src/**/*.py"))


def paragraphs(path: Path) -> Iterator[tuple[int, list[str]]]:
    split = python_paragraphs if path.suffix == ".py" else markdown_paragraphs
    return split(path.read_text(encoding="utf-8"))


def problems_in(path: Path) -> list[str]:
    where = path.relative_to(ROOT)
    return [f"{where}:{n}: {p}" for n, lines in paragraphs(path) for p in paragraph_problems(lines)]


def test_every_install_hint_works_from_a_clone() -> None:
    problems = [p for path in sources() for p in problems_in(path)]
    assert not problems, "\n".join(problems)


def test_the_hints_are_found() -> None:
    """The scan reads the places hints live in (a rule that reads nothing passes)."""
    found = [
        path.relative_to(ROOT).as_posix()
        for path in sources()
        for _, lines in paragraphs(path)
        if any(installs for line in lines for _, installs in commands(line))
    ]
    for place in (
        "README.md",
        "packages/acp-producer/README.md",
        "docs/quickstart-operator.md",
        "packages/react-consumer/src/agent_channel_react/__init__.py",
    ):
        assert place in found
    assert any(p.startswith("packages/acp-producer/src/") for p in found)


CORE, REACT, ACP = "./packages/channel-core", "./packages/react-consumer", "./packages/acp-producer"
SQLITE = "./packages/store-sqlite"  # the producer's store
ONCE = "once published, `pip install 'agent-channel-acp[demo]'`"


@pytest.mark.parametrize(
    "paragraph",
    [
        f"`pip install {CORE} {SQLITE} '{ACP}[remote]'`",
        f"`uv pip install -e {CORE} -e {SQLITE} -e {REACT} '{ACP}[demo,console]'`",
        f"{ONCE}; today `pip install {CORE} {SQLITE} {REACT} '{ACP}[demo]'`",
    ],
)
def test_the_rule_passes(paragraph: str) -> None:
    assert not paragraph_problems([paragraph])


@pytest.mark.parametrize(
    ("paragraph", "wrong"),
    [
        ("`pip install 'agent-channel-acp[remote]'`", "from an index"),
        ("once published, `uvx --from 'agent-channel-acp[demo]' agent-channel-acp`", "from an"),
        (f"{ONCE}; today `pip install {CORE} {SQLITE} {ACP}`", "from an index"),  # not [demo]
        (
            f"`pip install {CORE} {SQLITE} {REACT} '{ACP}[demo]'`, `pip install agent-channel-acp`",
            "from an",
        ),
        (f"`pip install {SQLITE} '{ACP}[remote]'`", "needs agent-channel-core"),
        (f"`pip install {CORE} {SQLITE} '{ACP}[demo]'`", "needs agent-channel-react"),
        (f"`pip install {CORE} '{ACP}[remote]'`", "needs agent-channel-sqlite"),
        (f"`pip install {CORE} {SQLITE} '{ACP}[gui]'`", "no extra gui"),
        (f"`pip install {CORE} ./packages/acp`", "not a workspace package's folder"),
        (f"`pip install {CORE} {FIELD}`", "built at run time"),
    ],
)
def test_the_rule_fails(paragraph: str, wrong: str) -> None:
    problems = paragraph_problems([paragraph])
    assert problems and all(wrong in p for p in problems), problems
