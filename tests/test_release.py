"""The three packages can be released as they stand: versions agree, ranges admit them.

docs/release.md is the procedure; these are the parts of it a machine can check on
every commit, so a release never starts from a tree that contradicts itself.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = sorted((ROOT / "packages").glob("*/pyproject.toml"))
VERSION_LINE = re.compile(r'^__version__ = "([^"]+)"$', re.M)
# Where each package states its version for `import x; x.__version__`.
VERSION_FILES = {
    "agent-channel-core": "src/agent_channel/__init__.py",
    "agent-channel-react": "src/agent_channel_react/__init__.py",
    "agent-channel-acp": "src/agent_channel_acp/_version.py",
    "agent-channel-ray": "src/agent_channel_ray/_version.py",
    "agent-channel-sqlite": "src/agent_channel_sqlite/__init__.py",
    "agent-channel-postgres": "src/agent_channel_postgres/__init__.py",
    "agent-channel-pydantic-ai": "src/agent_channel_pydantic_ai/__init__.py",
    "agent-channel-openai-agents": "src/agent_channel_openai_agents/__init__.py",
    "agent-channel-langgraph": "src/agent_channel_langgraph/__init__.py",
}


def _projects() -> dict[str, tuple[Path, dict[str, object]]]:
    found: dict[str, tuple[Path, dict[str, object]]] = {}
    for path in PACKAGES:
        project = tomllib.loads(path.read_text())["project"]
        found[canonicalize_name(project["name"])] = (path.parent, project)
    return found


def _requirements(project: dict[str, object]) -> list[tuple[str, Requirement]]:
    """(where, requirement) for the dependencies and every extra."""
    listed = [("dependencies", r) for r in project.get("dependencies", [])]  # type: ignore[union-attr]
    extras: dict[str, list[str]] = project.get("optional-dependencies", {})  # type: ignore[assignment]
    listed += [(f"extra {name!r}", r) for name, reqs in extras.items() for r in reqs]
    return [(where, Requirement(raw)) for where, raw in listed]


def range_problems(projects: dict[str, dict[str, object]]) -> list[str]:
    """Every requirement on a workspace package whose range excludes that package's version.

    With a range that misses the workspace version, the workspace would test one core and
    an installed wheel would pull another (or none: an unsatisfiable install).
    """
    versions = {name: Version(str(p["version"])) for name, p in projects.items()}
    problems = []
    for name, project in projects.items():
        for where, req in _requirements(project):
            target = canonicalize_name(req.name)
            if target in versions and not req.specifier.contains(versions[target]):
                problems.append(
                    f"{name} {where}: {req} excludes {target} {versions[target]} (the workspace's)"
                )
    return problems


def test_every_package_is_known() -> None:
    assert set(_projects()) == set(VERSION_FILES)


def test_ranges_on_workspace_packages_include_their_workspace_versions() -> None:
    projects = {name: project for name, (_, project) in _projects().items()}
    assert not range_problems(projects)


def test_a_range_that_misses_the_core_is_reported() -> None:
    projects: dict[str, dict[str, object]] = {
        "agent-channel-core": {"version": "0.3.0"},
        "agent-channel-react": {
            "version": "0.2.0",
            "dependencies": ["agent-channel-core>=0.2.0,<0.3", "anyio>=4"],
        },
        "agent-channel-acp": {
            "version": "0.2.0",
            "dependencies": ["agent-channel-core>=0.3,<0.4"],
            "optional-dependencies": {"demo": ["agent-channel-react[openai]>=0.3,<0.4"]},
        },
    }
    assert range_problems(projects) == [
        "agent-channel-react dependencies: agent-channel-core<0.3,>=0.2.0 excludes "
        "agent-channel-core 0.3.0 (the workspace's)",
        "agent-channel-acp extra 'demo': agent-channel-react[openai]<0.4,>=0.3 excludes "
        "agent-channel-react 0.2.0 (the workspace's)",
    ]


@pytest.mark.parametrize("name", sorted(VERSION_FILES))
def test_the_import_version_is_the_package_version(name: str) -> None:
    folder, project = _projects()[name]
    stated = VERSION_LINE.findall((folder / VERSION_FILES[name]).read_text())
    assert stated == [project["version"]]


@pytest.mark.parametrize("name", sorted(VERSION_FILES))
def test_the_changelog_starts_with_the_package_version(name: str) -> None:
    folder, project = _projects()[name]
    first = re.search(r"^## (\S+)", (folder / "CHANGELOG.md").read_text(), re.M)
    assert first, f"{name}: CHANGELOG.md has no version heading"
    assert first.group(1) == project["version"]


@pytest.mark.parametrize("name", sorted(VERSION_FILES))
def test_the_license_file_ships_and_is_the_repositorys(name: str) -> None:
    folder, project = _projects()[name]
    assert project["license"] == "MIT"
    assert project["license-files"] == ["LICENSE"]
    assert (folder / "LICENSE").read_text() == (ROOT / "LICENSE").read_text()
    assert "Copyright (c) 2026 the agent-channel authors" in (ROOT / "LICENSE").read_text()


@pytest.mark.parametrize("name", sorted(VERSION_FILES))
def test_the_index_page_links_docs_changelog_and_source(name: str) -> None:
    _, project = _projects()[name]
    urls: dict[str, str] = project["urls"]  # type: ignore[assignment]
    assert {"Documentation", "Changelog", "Source"} <= set(urls)
    assert all(url.startswith("https://") for url in urls.values())
