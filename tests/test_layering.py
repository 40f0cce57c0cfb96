"""The layering contracts in importlinter.toml hold, and they can actually fail."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "importlinter.toml"
SOURCES = {
    "agent_channel": ROOT / "packages/channel-core/src/agent_channel",
    "agent_channel_react": ROOT / "packages/react-consumer/src/agent_channel_react",
    "agent_channel_acp": ROOT / "packages/acp-producer/src/agent_channel_acp",
}


def _lint_imports() -> str:
    """The lint-imports of the interpreter running the tests (the workspace venv)."""
    candidate = Path(sys.executable).parent / "lint-imports"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("lint-imports")
    assert found, "lint-imports is not installed (uv sync installs it with the dev group)"
    return found


def _contract_names() -> dict[str, str]:
    config = tomllib.loads(CONFIG.read_text())
    return {c["id"]: c["name"] for c in config["tool"]["importlinter"]["contracts"]}


def _run(cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_lint_imports(), "--no-cache", "--config", str(CONFIG)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_layering_contracts_are_kept() -> None:
    result = _run(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    for name in _contract_names().values():
        assert f"{name} KEPT" in result.stdout


@pytest.mark.parametrize(
    ("package", "violation", "contract_id", "forbidden"),
    [
        ("agent_channel", "import agent_channel_acp", "core-standalone", "agent_channel_acp"),
        # anthropic is not installed: an absent forbidden SDK must still be caught.
        ("agent_channel", "import anthropic.types", "core-standalone", "anthropic"),
        (
            "agent_channel_react",
            "from agent_channel_acp import x",
            "consumer-producer-independent",
            "agent_channel_acp",
        ),
        ("agent_channel_react", "import acp", "only-producer-imports-acp", "acp"),
    ],
)
def test_a_violation_breaks_its_contract(
    tmp_path: Path, package: str, violation: str, contract_id: str, forbidden: str
) -> None:
    # Copy the three source trees outside the repo and add one violating module there;
    # PYTHONPATH puts the copies ahead of the editable installs.
    for name, src in SOURCES.items():
        shutil.copytree(src, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / package / "_layering_violation.py").write_text(violation + "\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path), env.get("PYTHONPATH")]))

    result = _run(tmp_path, env)

    assert result.returncode != 0, result.stdout + result.stderr
    name = _contract_names()[contract_id]
    assert f"{name} BROKEN" in result.stdout
    assert f"{package}._layering_violation -> {forbidden}" in result.stdout
    for other_id, other in _contract_names().items():
        if other_id != contract_id:
            assert f"{other} KEPT" in result.stdout
