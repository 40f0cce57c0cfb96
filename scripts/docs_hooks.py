"""MkDocs hooks: pages whose text is generated from the source at build time.

Generated, not hand-written, so they cannot drift from what they describe:

- ``<!-- cli-reference -->`` becomes the ``--help`` of ``agent-channel-acp`` and of every
  subcommand, rendered from the parser the command itself uses (subcommands added
  later appear without anyone editing the page);
- ``<!-- example NAME -->`` becomes the README example of that name (``examples.py``), the
  code CI's wheel smoke runs;
- ``<!-- rule-tests -->`` becomes a table of the rules (the behaviour rules S, A and D of
  ``docs/acp-behaviour.md``, then those of any other page of ``docs/``: K of
  ``docs/children.md``, Q, D of ``docs/durability.md``) and the tests named for each
  (``test_s5b_...``, ``test_k11_...``),
  read from the test files, so the page shows what the suite proves today and what it does not;
- ``<!-- include PATH -->`` becomes the Markdown file at PATH (relative to the
  repository root) with its title dropped and its headings one level down, so the
  package changelogs sit under one page's headings;
- ``<!-- api`` holds an API page's mkdocstrings directive (``::: module`` and its options,
  ``members:`` in reading order) inside the comment, closed by ``-->`` on a line of its
  own: the site gets the directive back and mkdocstrings renders it; the file holds the
  same names as Markdown (``api_pages.py``: signatures and docstrings, read by griffe).

Each directive opens a section that ``<!-- /NAME -->`` closes, and the file holds the
generated text between the two, so the page reads whole where the Markdown itself is
read (a code host): ``scripts/gen_docs.py`` writes it, ``tests/test_docs_site.py`` fails
when a file no longer matches its source, and the build renders it afresh anyway. An
included file is the exception: the raw page links to it (it changes with every
changelog entry), the site shows its text. An API page is the other: the site drops the
file's text for what mkdocstrings renders from the directive, so it shows each name once.

A directive that cannot be honoured (a missing file, a parser that will not build) stops
the build: a page is never published with a hole in it.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from examples import ROOT, example  # after the path insert: a hook is loaded by path

CLI_WIDTH = 88
"""Columns the help is wrapped to, fixed so the page does not depend on the terminal."""

_SECTION = re.compile(
    r"^<!-- (?:(?P<name>example|cli-reference|rule-tests|include)(?: (?P<arg>\S+))? -->$"
    r"|(?P<api>api)\n(?P<directive>::: .*?)^-->$)"  # the directive inside the comment
    r"(?:\n.*?^<!-- /(?(api)api|(?P=name)) -->$)?",  # not yet followed by its text: the marker
    re.M | re.S,
)
_RULE = re.compile(r"^- \*\*([SAKQD][1-9][0-9]?[a-z]?)\*\* (.*)$", re.M)
_RULE_TEST = re.compile(r"^(?:async )?def (test_([sakqd][1-9][0-9]?[a-z]?)_\w*)", re.M)
_RULE_PAGE = "docs/acp-behaviour.md"
"""The page of the behaviour rules (S, A, D); other pages of ``docs/`` follow (K, Q)."""
_HEADING = re.compile(r"^(#{1,5}) ", re.M)


def _subcommands(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """The parser, then each subcommand's parser depth first, in the order they were added."""
    found = [parser]
    for action in parser._actions:  # argparse keeps subparsers only here
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):  # aliases share a parser
                found += _subcommands(sub)
    return found


def cli_reference() -> str:
    """Markdown: one section per command with its help text verbatim."""
    from agent_channel_acp.cli._parser import build_parser

    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(CLI_WIDTH)  # argparse reads the width from here
    try:
        parsers = _subcommands(build_parser())
        sections = [f"## `{p.prog}`\n\n```text\n{p.format_help().rstrip()}\n```\n" for p in parsers]
    finally:
        if saved is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = saved
    return "\n".join(sections)


def rule_tests() -> str:
    """Markdown: each rule, its first line, and the tests named for it."""
    proving: dict[str, list[str]] = {}
    for path in sorted(
        [*ROOT.glob("tests/**/test_*.py"), *ROOT.glob("packages/*/tests/test_*.py")]
    ):
        for name, rule in _RULE_TEST.findall(path.read_text(encoding="utf-8")):
            rule_id = rule[0].upper() + rule[1:]
            proving.setdefault(rule_id, []).append(f"`{path.relative_to(ROOT)}::{name}`")
    rules = _RULE.findall((ROOT / _RULE_PAGE).read_text(encoding="utf-8"))
    if not rules:
        raise LookupError(f"<!-- rule-tests -->: no rules found in {_RULE_PAGE}")
    seen = {rule_id for rule_id, _ in rules}
    for page in sorted((ROOT / "docs").glob("*.md")):
        if page != ROOT / _RULE_PAGE:
            for rule_id, text in _RULE.findall(page.read_text(encoding="utf-8")):
                if rule_id[0] in "KQD" and rule_id not in seen:
                    seen.add(rule_id)
                    rules.append((rule_id, text))
    rows = ["| rule | what it says | tests named for it |", "|---|---|---|"]
    for rule_id, text in rules:
        summary = text.strip().replace("|", "\\|") + " …"  # the rule's first line
        if summary.count("`") % 2:  # a code span the line break cut open
            summary = summary.replace(" …", "` …")
        tests = "<br>".join(proving.get(rule_id, [])) or "—"
        rows.append(f"| **{rule_id}** | {summary} | {tests} |")
    return "\n".join(rows) + "\n"


def include(path: str) -> str:
    """The Markdown file at ``path`` without its title, headings one level down."""
    source = ROOT / path
    if not source.is_file():
        raise FileNotFoundError(f"<!-- include {path} -->: no file {source}")
    text = re.sub(r"\A# .*\n+", "", source.read_text(encoding="utf-8"))
    return _HEADING.sub(lambda m: f"#{m.group(1)} ", text)


def _generated(name: str, arg: str | None, page: Path | None) -> str:
    """The Markdown a directive stands for; for an include in a raw page, a link to it;
    for an API page on the site, its mkdocstrings directive (``arg``)."""
    if name == "api" and arg is not None:
        if page is None:
            return arg
        from api_pages import reference  # griffe, only for the files' text

        return reference(arg)
    if name == "cli-reference":
        return cli_reference()
    if name == "rule-tests":
        return rule_tests()
    if arg is None:
        raise ValueError(f"<!-- {name} --> needs an argument")
    if name == "example":
        return f"```python\n{example(arg)}```\n"
    if page is None:
        return include(arg)
    if not (ROOT / arg).is_file():
        raise FileNotFoundError(f"<!-- include {arg} -->: no file {ROOT / arg}")
    link = os.path.relpath(ROOT / arg, page.parent)
    return f"The documentation site shows [`{arg}`]({link}) here.\n"


def render(markdown: str, page: Path | None = None) -> str:
    """Every directive's section filled from the source.

    With ``page`` (the file's path) the result is the raw file as it should be, markers
    kept and the text between them; without, it is what the site shows, markers gone.
    """

    def fill(m: re.Match[str]) -> str:
        name, arg = m.group("name") or m.group("api"), m.group("arg") or m.group("directive")
        text = _generated(name, arg, page)
        if page is None:
            return text
        if name == "api":
            opening = f"<!-- api\n{arg}-->"
        else:
            opening = f"<!-- {name} {arg} -->" if arg else f"<!-- {name} -->"
        return f"{opening}\n\n{text}\n<!-- /{name} -->"

    return _SECTION.sub(fill, markdown)


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    return render(markdown)
