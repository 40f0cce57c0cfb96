"""MkDocs hooks: pages whose text is generated from the source at build time.

Generated, not hand-written, so they cannot drift from what they describe:

- ``<!-- cli-reference -->`` becomes the ``--help`` of ``agent-channel-acp`` and of every
  subcommand, rendered from the parser the command itself uses (subcommands added
  later appear without anyone editing the page);
- ``<!-- example NAME -->`` becomes the README example of that name (``examples.py``), the
  code CI's wheel smoke runs;
- ``<!-- rule-tests -->`` becomes a table of the behaviour rules of
  ``docs/acp-behaviour.md`` and the tests named for each (``test_s5b_...``), read from
  the test files, so the page shows what the suite proves today and what it does not;
- ``<!-- include PATH -->`` becomes the Markdown file at PATH (relative to the
  repository root) with its title dropped and its headings one level down, so the
  package changelogs sit under one page's headings.

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

_CLI = re.compile(r"^<!-- cli-reference -->$", re.M)
_EXAMPLE = re.compile(r"^<!-- example (\S+) -->$", re.M)
_RULE_TESTS = re.compile(r"^<!-- rule-tests -->$", re.M)
_RULE = re.compile(r"^- \*\*([SA][1-9][0-9]?[a-z]?)\*\* (.*)$", re.M)
_RULE_TEST = re.compile(r"^(?:async )?def (test_([sa][1-9][0-9]?[a-z]?)_\w*)", re.M)
_INCLUDE = re.compile(r"^<!-- include (\S+) -->$", re.M)
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
    from agent_channel_acp._cli import build_parser

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
    rules = _RULE.findall((ROOT / "docs/acp-behaviour.md").read_text(encoding="utf-8"))
    if not rules:
        raise LookupError("<!-- rule-tests -->: no rules found in docs/acp-behaviour.md")
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


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    markdown = _CLI.sub(lambda _: cli_reference(), markdown)
    markdown = _RULE_TESTS.sub(lambda _: rule_tests(), markdown)
    markdown = _EXAMPLE.sub(lambda m: f"```python\n{example(m.group(1))}```", markdown)
    return _INCLUDE.sub(lambda m: include(m.group(1)), markdown)
