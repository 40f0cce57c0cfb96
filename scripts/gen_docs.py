"""Write the generated sections of the documentation into the Markdown files themselves.

    uv run python scripts/gen_docs.py           # rewrite every page whose section is stale
    uv run python scripts/gen_docs.py --check   # change nothing; exit 1 naming stale pages

The sections are those of the build hooks (``docs_hooks.py``): ``<!-- cli-reference -->``
(the command's ``--help``), ``<!-- rule-tests -->``, ``<!-- example NAME -->``,
``<!-- include PATH -->`` and the API pages' ``<!-- api`` (their mkdocstrings directive, the
names' signatures and docstrings written out: ``api_pages.py``), each closed by
``<!-- /NAME -->``. Run it after changing the command line, a README example, a rule or a
test named for one, a public name's signature or docstring, or an API page's ``members:``;
``tests/test_docs_site.py`` fails until the files match. Needs the workspace's venv (the CLI
reference imports ``agent_channel_acp``; the API pages need griffe).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from docs_hooks import render  # after the path insert
from examples import ROOT


def stale_pages() -> dict[Path, str]:
    """Each page whose file differs from its freshly rendered text, with that text."""
    stale: dict[Path, str] = {}
    for page in sorted((ROOT / "docs").rglob("*.md")):
        text = page.read_text(encoding="utf-8")
        fresh = render(text, page)
        if fresh != text:
            stale[page] = fresh
    return stale


def main(argv: list[str]) -> int:
    check = argv == ["--check"]
    if argv and not check:
        print("usage: gen_docs.py [--check]", file=sys.stderr)
        return 2
    stale = stale_pages()
    for page, fresh in stale.items():
        name = page.relative_to(ROOT)
        if check:
            print(f"{name}: stale (run: uv run python scripts/gen_docs.py)")
        else:
            page.write_text(fresh, encoding="utf-8")
            print(f"{name}: regenerated")
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
