"""The repository stands alone: its documents are inside it, and tests cite rules that exist."""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "docs/acp-behaviour.md"
# Spelled in two halves so this file does not match itself.
OUTSIDE = ("../" + "shared", "shared" + "/design", "/work/" + "shared")
RULE_ID = re.compile(r"\b([SAD][1-9][0-9]?[a-z]?)\b")
TEST_NAME_RULE = re.compile(r"^test_([sad][1-9][0-9]?[a-z]?)_")


def _repo_files() -> list[Path]:
    """Tracked files plus new ones not ignored (so a file not yet committed counts too)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout.decode()
    return [ROOT / name for name in listed.split("\0") if name and (ROOT / name).is_file()]


def test_no_file_points_outside_the_repository() -> None:
    offenders = []
    for path in _repo_files():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if any(marker in line for marker in OUTSIDE):
                offenders.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not offenders, "point these at docs/ instead:\n" + "\n".join(offenders)


def _documented_rules() -> set[str]:
    # A rule is defined by a list item that starts with its id in bold: "- **S5b** ...".
    pages = (RULES, ROOT / "docs/durability.md")  # D: the ACP part here, all eight there
    text = "\n".join(p.read_text() for p in pages)
    return set(re.findall(r"^- \*\*([SAD][1-9][0-9]?[a-z]?)\*\*", text, re.M))


def _cited_rules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    cited: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        cited |= set(RULE_ID.findall(ast.get_docstring(node) or ""))
        if not isinstance(node, ast.Module) and (match := TEST_NAME_RULE.match(node.name)):
            rule = match.group(1)  # "s5b" names rule S5b
            cited.add(rule[0].upper() + rule[1:])
    return cited


def test_the_rule_document_defines_both_modes() -> None:
    rules = _documented_rules()
    assert {f"S{n}" for n in range(1, 17)} | {"S5b"} <= rules
    assert {f"A{n}" for n in range(1, 28)} <= rules
    assert "D5" in rules  # the durable executions' ACP rule (session/list, session/resume)


def test_every_rule_a_test_cites_is_documented() -> None:
    rules = _documented_rules()
    missing = {
        f"{path.relative_to(ROOT)}: {rule}"
        for path in sorted([*ROOT.glob("tests/**/*.py"), *ROOT.glob("packages/*/tests/**/*.py")])
        for rule in _cited_rules(path) - rules
    }
    assert not missing, f"cited in tests but not defined in {RULES.name}: {missing}"


def test_citations_are_found_in_test_names_and_docstrings(tmp_path: Path) -> None:
    sample = tmp_path / "test_sample.py"
    sample.write_text(
        '"""Module: S3."""\n'
        "class TestA4:\n"
        '    """Class: A5."""\n'
        "    async def test_s5b_x(self):\n"
        '        """Function: S14 (not S140, nor FS1)."""\n'
        "def test_a12_y():\n"
        "    x = 'S9'  # neither a name nor a docstring\n"
    )
    assert _cited_rules(sample) == {"S3", "A5", "S5b", "S14", "A12"}


def test_relative_links_in_markdown_resolve() -> None:
    broken = []
    for path in _repo_files():
        if path.suffix != ".md":
            continue
        for target in re.findall(r"\]\(([^)\s]+)\)", path.read_text(encoding="utf-8")):
            if re.match(r"[a-z][a-z0-9+.-]*:|#", target):  # a URL or an anchor
                continue
            if not (path.parent / target.split("#")[0]).exists():
                broken.append(f"{path.relative_to(ROOT)}: {target}")
    assert not broken, broken
