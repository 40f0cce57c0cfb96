"""The site's generated pages: what the build hooks put in them (the build itself is in CI).

The hooks run without MkDocs, so these checks cost nothing beside the strict build.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def hooks() -> ModuleType:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        return _load("docs_hooks")
    finally:
        sys.path.remove(str(ROOT / "scripts"))


def test_the_cli_reference_has_every_subcommand_with_its_help(hooks: ModuleType) -> None:
    from agent_channel_acp.cli._parser import build_parser

    page = hooks.on_page_markdown("# CLI\n\n<!-- cli-reference -->\n")
    (subparsers,) = [
        a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)
    ]
    titles = re.findall(r"^## `([^`]+)`$", page, re.M)
    assert titles == ["agent-channel-acp", *(f"agent-channel-acp {c}" for c in subparsers.choices)]
    assert "<!--" not in page
    for command in subparsers.choices.values():
        assert command.format_help().splitlines()[0] in page  # its usage line, verbatim


def test_nested_subcommands_are_listed_too(hooks: ModuleType) -> None:
    top = argparse.ArgumentParser(prog="tool")
    middle = top.add_subparsers().add_parser("hub")
    middle.add_subparsers().add_parser("list")
    assert [p.prog for p in hooks._subcommands(top)] == ["tool", "tool hub", "tool hub list"]


def test_an_included_changelog_drops_its_title_and_moves_down_a_level(
    hooks: ModuleType,
) -> None:
    page = hooks.on_page_markdown(
        "## core\n\n<!-- include packages/channel-core/CHANGELOG.md -->\n"
    )
    assert "# Changelog" not in page
    assert re.search(r"^### \d+\.\d+\.\d+", page, re.M)
    assert not re.search(r"^## \d", page, re.M)


def test_an_include_of_a_missing_file_stops_the_build(hooks: ModuleType) -> None:
    with pytest.raises(FileNotFoundError, match="no file"):
        hooks.on_page_markdown("<!-- include packages/nope/CHANGELOG.md -->\n")


def test_every_readme_example_the_site_shows_exists(hooks: ModuleType) -> None:
    examples = _load("examples")
    for name in examples.EXAMPLES:
        page = hooks.on_page_markdown(f"<!-- example {name} -->\n")
        assert page.startswith("```python\n") and page.rstrip().endswith("```")
    shown = {
        m
        for path in (ROOT / "docs").rglob("*.md")
        for m in re.findall(r"^<!-- example (\S+) -->$", path.read_text(), re.M)
    }
    assert shown <= set(examples.EXAMPLES)


def test_sphinx_roles_read_as_code() -> None:
    pytest.importorskip("griffe")
    roles = _load("griffe_roles")
    text = "Binds :class:`~agent_channel.AgentRef` via :meth:`AgentChannel.ref` and :func:`x.y`."
    assert roles.plain(text) == "Binds `AgentRef` via `AgentChannel.ref` and `x.y`."


def test_the_rule_table_has_every_rule_and_the_tests_named_for_it(hooks: ModuleType) -> None:
    page = hooks.on_page_markdown("<!-- rule-tests -->\n")
    rows = re.findall(r"^\| \*\*([SAD]\w+)\*\* \| .* \| (.*) \|$", page, re.M)
    documented: list[str] = []
    for page_name in ("docs/acp-behaviour.md", "docs/durability.md"):  # D5 is in both
        found = re.findall(
            r"^- \*\*([SAD][1-9][0-9]?[a-z]?)\*\*", (ROOT / page_name).read_text(), re.M
        )
        documented += [r for r in found if r not in documented]
    assert [rule for rule, _ in rows] == documented
    proven = dict(rows)
    assert "tests/acp/stdio/test_session_cancel.py::test_s5b_" in proven["S5b"]


def _code_in(markdown: str) -> list[str]:
    """Fenced blocks and inline code spans: where a page shows a command to type."""
    fenced = re.findall(r"^```[^\n]*\n(.*?)^```", markdown, re.M | re.S)
    rest = re.sub(r"^```[^\n]*\n.*?^```", "", markdown, flags=re.M | re.S)
    return fenced + re.findall(r"`([^`]+)`", rest)


def test_every_subcommand_the_pages_show_exists() -> None:
    from agent_channel_acp.cli._parser import build_parser

    (subparsers,) = [
        a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)
    ]
    pages = [*(ROOT / "docs").rglob("*.md"), *ROOT.glob("packages/*/README.md")]
    unknown = {
        f"{page.relative_to(ROOT)}: agent-channel-acp {word}"
        for page in pages
        for code in _code_in(page.read_text())
        for word in re.findall(r"agent-channel-acp ([a-z][a-z-]*)", code)
        if word not in subparsers.choices
    }
    assert not unknown, unknown


_DIRECTIVE = re.compile(
    r"^<!-- (example|cli-reference|rule-tests|include)\b[^>]*-->$|^<!-- (api)\n.*?^-->$",
    re.M | re.S,
)


def test_no_directive_leaves_an_empty_section_in_the_raw_page() -> None:
    """A reader on a code host sees the file as it is: the generated text must be in it."""
    empty = []
    for page in sorted((ROOT / "docs").rglob("*.md")):
        text = page.read_text(encoding="utf-8")
        for m in _DIRECTIVE.finditer(text):
            close = text.find(f"<!-- /{m.group(1) or m.group(2)} -->", m.end())
            if close == -1 or not text[m.end() : close].strip():
                empty.append(f"{page.relative_to(ROOT)}: {m.group(0).splitlines()[0]}")
    assert not empty, "sections with nothing in the file (run scripts/gen_docs.py):\n" + "\n".join(
        empty
    )


def test_the_raw_pages_hold_what_the_site_shows(hooks: ModuleType) -> None:
    """What a page's file holds between its markers is what the source says today."""
    stale = [
        str(page.relative_to(ROOT))
        for page in sorted((ROOT / "docs").rglob("*.md"))
        if hooks.render(text := page.read_text(encoding="utf-8"), page) != text
    ]
    assert not stale, (
        f"stale generated sections in {', '.join(stale)}: "
        "regenerate with `uv run python scripts/gen_docs.py` and commit the result"
    )


def test_the_site_shows_the_generated_text_without_markers(hooks: ModuleType) -> None:
    raw = (ROOT / "docs/quickstart-agent-author.md").read_text(encoding="utf-8")
    page = hooks.on_page_markdown(raw)
    assert "<!-- example" not in page and "<!-- /example -->" not in page
    assert page.count('"""letters.py') == 1  # the example once, not once per marker
    included = hooks.on_page_markdown((ROOT / "docs/changelog.md").read_text(encoding="utf-8"))
    assert "The documentation site shows" not in included  # the site shows the text itself
    assert re.search(r"^### \d+\.\d+\.\d+", included, re.M)


def test_the_site_shows_an_api_page_once_through_mkdocstrings(hooks: ModuleType) -> None:
    """The site gets the directive back for mkdocstrings; the file's text is for code hosts."""
    raw = (ROOT / "docs/api/core.md").read_text(encoding="utf-8")
    assert raw.count("\n## `open_channel`\n") == 1  # what a code host shows
    page = hooks.on_page_markdown(raw)
    assert "<!--" not in page and "-->" not in page
    assert re.search(r"^::: agent_channel\n    options:\n", page, re.M)
    assert "## `open_channel`" not in page  # mkdocstrings renders it, once


def test_an_api_page_shows_signatures_docstrings_and_members(hooks: ModuleType) -> None:
    pytest.importorskip("griffe")
    directive = (
        '::: agent_channel\n    options:\n      filters: ["!^_[^_]", "!^(post|closed)$"]\n'
        "      members:\n        - AgentRef\n        - open_channel\n        - ChatMessage\n"
    )
    page = hooks.on_page_markdown(f"# x\n\n<!-- api\n{directive}-->\n")
    assert page == f"# x\n\n{directive}\n"  # the site: the directive alone
    text = hooks.render(f"<!-- api\n{directive}-->\n", ROOT / "docs/api/x.md")
    assert re.findall(r"^## `(\w+)`$", text, re.M) == ["AgentRef", "open_channel", "ChatMessage"]
    assert (
        "```python\nclass AgentRef:\n    def __init__(self, channel: AgentChannel) -> None\n```"
        in (text)
    )
    assert "\nasync def open_channel(\n    *,\n    approver: Approver | None = None,\n" in text
    assert "`AgentChannel.post`" in text  # a Sphinx role as code, as on the site
    assert "- `interrupt(cancel: Cancel | None = None) -> None`: Stop the work" in text
    assert "`post(" not in text and "`closed" not in text  # the directive's filters
    assert "- `turn_state: TurnState` *property*: " in text
    assert "\nChatMessage = Annotated[ChatMessageSystem | ChatMessageUser" in text


@pytest.mark.parametrize(
    ("page", "module"),
    [
        ("core", "agent_channel"),
        ("react", "agent_channel_react"),
        ("acp", "agent_channel_acp"),
        ("ray", "agent_channel_ray"),
        ("sqlite", "agent_channel_sqlite"),
        ("postgres", "agent_channel_postgres"),
        ("postgres-testing", "agent_channel_postgres.testing"),
        ("testing", "agent_channel.testing"),
        ("lowlevel", "agent_channel.lowlevel"),
        ("abc", "agent_channel.abc"),
    ],
)
def test_an_api_page_lists_every_public_name_once(page: str, module: str) -> None:
    """The pages order their members by hand: a name added to ``__all__`` must be placed."""
    import importlib

    text = (ROOT / f"docs/api/{page}.md").read_text(encoding="utf-8")
    directive = text[text.index("\n::: ") : text.index("\n-->\n")]  # not the generated text
    listed = re.findall(r"^        - (\w+)$", directive, re.M)
    public = set(importlib.import_module(module).__all__) - {"__version__"}
    assert len(listed) == len(set(listed))
    assert set(listed) == public


def test_the_check_names_an_api_page_whose_docstring_changed(tmp_path: Path) -> None:
    """An API page's text is the source's: a changed docstring makes that page stale."""
    import shutil
    import subprocess

    ignore = shutil.ignore_patterns("__pycache__", "node_modules", "*.png", "*.svg")
    for folder in ("docs", "packages", "scripts", "tests"):
        shutil.copytree(ROOT / folder, tmp_path / folder, ignore=ignore)
    for top in (*ROOT.glob("*.md"), ROOT / "mkdocs.yml"):
        shutil.copy(top, tmp_path / top.name)
    source = tmp_path / "packages/channel-core/src/agent_channel/_execution.py"
    old = '    """Start an execution: a fresh channel, ambient for the block.\n'
    text = source.read_text(encoding="utf-8")
    assert text.count(old) == 1
    source.write_text(text.replace(old, old.replace("Start", "Begin")), encoding="utf-8")

    check = subprocess.run(
        [sys.executable, "scripts/gen_docs.py", "--check"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert check.returncode == 1, check.stdout + check.stderr
    assert check.stdout.splitlines() == [
        "docs/api/core.md: stale (run: uv run python scripts/gen_docs.py)"
    ], check.stderr
    fixed = subprocess.run(
        [sys.executable, "scripts/gen_docs.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert fixed.returncode == 0, fixed.stderr
    assert "Begin an execution: a fresh channel" in (tmp_path / "docs/api/core.md").read_text()


def test_an_api_signature_keeps_its_markers_and_google_sections_read_as_lists() -> None:
    griffe = pytest.importorskip("griffe")
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        api = _load("api_pages")
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    code = (
        "def f(a: int, /, b='x', *rest: str, c: bool = False, **kw: object) -> int:\n"
        '    """Do it.\n\n    Args:\n        a: The thing.\n\n    Returns:\n        The other.\n\n'
        '    Note:\n        Careful.\n    """\n'
        "def g(*, d: int) -> None: ...\n"
    )
    with griffe.temporary_visited_module(code, docstring_parser="google") as module:
        assert api._def(module["f"]) == (
            "def f(a: int, /, b='x', *rest: str, c: bool = False, **kw: object) -> int"
        )
        assert api._def(module["g"]) == "def g(*, d: int) -> None"
        assert api._docstring(module["f"]) == (
            "Do it.\n\n**Parameters:**\n\n- `a` (`int`): The thing.\n\n"
            "**Returns:**\n\n- `int`: The other.\n\n**Note:** Careful."
        )
