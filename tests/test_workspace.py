"""The workspace's own configuration points at things that exist, and CI checks the right env."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CI = ROOT / ".ci/run"


def test_every_testpaths_entry_is_a_folder_with_tests() -> None:
    # pytest skips a testpaths entry that does not exist without a word.
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    testpaths = config["tool"]["pytest"]["ini_options"]["testpaths"]
    assert testpaths
    for entry in testpaths:
        folder = ROOT / entry
        assert folder.is_dir(), f"testpaths names {entry!r}, which is not a folder"
        assert any(folder.rglob("test_*.py")), f"testpaths names {entry!r}, which has no tests"


def _ci_pip_check_command() -> str:
    lines = [line for line in CI.read_text().splitlines() if line.startswith('"$uv_bin" pip check')]
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.skipif(shutil.which("uv") is None, reason="uv is not on PATH")
def test_ci_pip_check_checks_the_project_environment() -> None:
    # Replay .ci/run's `uv pip check` line in the environment .ci/run sets up (UV_PYTHON is
    # the machine's interpreter, no VIRTUAL_ENV) and count what it checked: it must be the
    # workspace venv, not the interpreter uv was told to use for creating it.
    venv = Path(sys.prefix)
    assert venv != Path(sys.base_prefix), "the suite runs in the workspace venv"
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env |= {
        "uv_bin": str(shutil.which("uv")),
        "UV_PYTHON": str(Path(sys.base_prefix, "bin", "python3")),
        "UV_PYTHON_DOWNLOADS": "never",
    }
    result = subprocess.run(
        ["bash", "-c", _ci_pip_check_command()],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    # The venv's own site-packages: an imported ray puts its vendored copies on sys.path.
    site = sorted({sysconfig.get_paths()[k] for k in ("purelib", "platlib")})
    installed = {d.metadata["Name"].lower() for d in metadata.distributions(path=site)}
    checked = re.search(r"Checked (\d+) packages?", output)
    assert checked, output
    assert int(checked.group(1)) == len(installed), output
