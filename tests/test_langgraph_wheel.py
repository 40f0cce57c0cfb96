"""The LangGraph adapter's wheel: its package alone, its entry point, its two requirements.

Installing it alone beside the core's and running the example is ``scripts/smoke_wheels.py``
(CI's wheel smoke); here the built wheel's contents are read.
"""

from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
ADAPTER = ROOT / "packages/langgraph-adapter"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    uv = os.environ.get("UV") or shutil.which("uv")
    if not uv:
        pytest.fail("uv is required (run the tests with `uv run`, see .ci/run)")
    dist = tmp_path_factory.mktemp("langgraph-wheel")
    subprocess.run(
        [uv, "build", "--wheel", str(ADAPTER), "--out-dir", str(dist)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (built,) = dist.glob("agent_channel_langgraph-0.1.0-py3-none-any.whl")
    return zipfile.ZipFile(built)


def test_the_wheel_ships_its_package_alone_typed(wheel: zipfile.ZipFile) -> None:
    tops = {n.split("/")[0] for n in wheel.namelist()}
    assert tops == {"agent_channel_langgraph", "agent_channel_langgraph-0.1.0.dist-info"}
    assert "agent_channel_langgraph/py.typed" in wheel.namelist()


def test_the_producer_finds_it_by_its_entry_point(wheel: zipfile.ZipFile) -> None:
    points = configparser.ConfigParser()
    points.read_string(
        wheel.read("agent_channel_langgraph-0.1.0.dist-info/entry_points.txt").decode()
    )
    assert dict(points["agent_channel.adapters"]) == {
        "langgraph": "agent_channel_langgraph._detect:adapt"
    }


def test_it_requires_the_core_and_a_pinned_langgraph_only(wheel: zipfile.ZipFile) -> None:
    meta = Parser().parsestr(
        wheel.read("agent_channel_langgraph-0.1.0.dist-info/METADATA").decode()
    )
    required = {
        Requirement(r).name: str(Requirement(r).specifier)
        for r in meta.get_all("Requires-Dist") or []
    }
    assert required == {"agent-channel-core": "<0.3,>=0.2.0", "langgraph": "<1.3,>=1.2.24"}
