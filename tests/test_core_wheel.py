"""The core wheel installs alone (anyio + pydantic only) and runs an interruptible loop."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from importlib.metadata import Distribution, distributions
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "packages/channel-core"

# Everything anyio and pydantic may legitimately pull in (any supported platform).
ALLOWED_CLOSURE = {
    "agent-channel-core",
    "anyio",
    "idna",
    "sniffio",
    "typing-extensions",
    "exceptiongroup",
    "pydantic",
    "pydantic-core",
    "annotated-types",
    "typing-inspection",
}
SEED_PACKAGES = {"pip", "setuptools", "wheel"}

AGENT_LOOP = r"""
import json

import anyio

import agent_channel
from agent_channel import AgentInterrupted, Cancel, UserMessage, open_channel


def text_of(message):
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(getattr(part, "text", "") for part in content)


async def main():
    result = {"core_file": agent_channel.__file__}
    with anyio.fail_after(10):
        async with open_channel() as ch:
            ref = ch.ref()
            working = anyio.Event()

            async def operator():
                await working.wait()
                ref.post(UserMessage(content="go left"))
                ref.interrupt(Cancel(reason="user_cancel"))

            async with anyio.create_task_group() as tg:
                tg.start_soon(operator)
                try:
                    with ch.scope():
                        working.set()
                        await anyio.sleep_forever()  # a turn that never ends on its own
                    result["interrupted"] = False
                except AgentInterrupted as exc:
                    result["interrupted"] = True
                    result["cancel_reason"] = exc.cancel.reason

            items = ch.drain()
            result["items"] = [type(item).__name__ for item in items]
            result["cancels"] = [i.reason for i in items if isinstance(i, Cancel)]
            result["messages"] = [text_of(i) for i in items if isinstance(i, UserMessage)]
            # Redirect: the next turn works on what the operator said.
            result["next_turn"] = result["messages"][-1] if result["messages"] else None
            result["drained_again"] = len(ch.drain())
    print(json.dumps(result))


anyio.run(main)
"""


def _uv() -> str:
    uv = os.environ.get("UV") or shutil.which("uv")
    if not uv:
        pytest.fail("uv is required (run the tests with `uv run`, see .ci/run)")
    return uv


def _run(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, f"{args}\n{result.stdout}\n{result.stderr}"
    return result


def _requirement_closure(root: str, installed: dict[str, Distribution]) -> set[str]:
    """Names reachable from `root` through installed requirements whose markers apply."""
    seen: set[str] = set()
    todo = [canonicalize_name(root)]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for raw in installed[name].requires or []:
            req = Requirement(raw)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(canonicalize_name(req.name))
    return seen


@pytest.fixture(scope="module")
def core_venv(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A fresh virtualenv with only the freshly built core wheel installed."""
    uv = _uv()
    tmp = tmp_path_factory.mktemp("core-wheel")
    dist = tmp / "dist"
    _run(uv, "build", "--wheel", CORE, "--out-dir", dist, cwd=tmp)
    (wheel,) = dist.glob("agent_channel_core-*.whl")
    venv = tmp / "venv"
    _run(uv, "venv", "--no-config", "--python", sys.executable, venv, cwd=tmp)
    python = venv / "bin" / "python"
    _run(uv, "pip", "install", "--no-config", "--python", python, wheel, cwd=tmp)
    return wheel, python


def test_wheel_ships_only_the_core_package(core_venv: tuple[Path, Path]) -> None:
    wheel, _ = core_venv
    with zipfile.ZipFile(wheel) as zf:
        tops = {name.split("/", 1)[0] for name in zf.namelist()}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"agent_channel"}


def test_wheel_installs_with_only_anyio_and_pydantic(core_venv: tuple[Path, Path]) -> None:
    _, python = core_venv
    listed = _run(_uv(), "pip", "list", "--python", python, "--format", "json", cwd=python.parent)
    installed_names = {canonicalize_name(p["name"]) for p in json.loads(listed.stdout)}

    site = _run(
        python,
        "-I",
        "-c",
        "import sysconfig; print(sysconfig.get_paths()['purelib'])",
        cwd=python.parent,
    ).stdout.strip()
    installed = {canonicalize_name(d.metadata["Name"]): d for d in distributions(path=[site])}
    assert set(installed) == installed_names

    core = installed["agent-channel-core"]
    direct = {canonicalize_name(Requirement(r).name) for r in core.requires or []}
    assert direct == {"anyio", "pydantic"}

    closure = _requirement_closure("agent-channel-core", installed)
    assert closure <= ALLOWED_CLOSURE, closure - ALLOWED_CLOSURE
    assert installed_names - SEED_PACKAGES == closure


def test_agent_loop_in_the_bare_venv_is_interrupted_and_redirected(
    core_venv: tuple[Path, Path], tmp_path: Path
) -> None:
    _, python = core_venv
    script = tmp_path / "agent_loop.py"
    script.write_text(AGENT_LOOP)
    # -I: ignore PYTHONPATH and user site, so only the venv's packages are visible.
    out = _run(python, "-I", script, cwd=tmp_path).stdout
    result = json.loads(out.strip().splitlines()[-1])

    assert Path(result["core_file"]).is_relative_to(python.parent.parent)
    assert result["interrupted"] is True
    assert result["cancel_reason"] == "user_cancel"
    assert result["cancels"] == []  # the stop was delivered once, by AgentInterrupted
    assert result["messages"] == ["go left"]
    assert result["items"] == ["UserMessage"]
    assert result["next_turn"] == "go left"
    assert result["drained_again"] == 0


NO_SQLITE = r"""
import json, sys
import agent_channel, agent_channel.lowlevel, agent_channel.testing
from agent_channel.testing import MemoryStore, run_store_checks

for name in agent_channel.__all__:  # every public name loaded
    getattr(agent_channel, name)


def location():
    current = []

    def opener():
        store = current[-1].reopen() if current else MemoryStore()
        current.append(store)
        return store

    return opener


failed = {k: v for k, v in run_store_checks(location).items() if v is not None}
try:
    agent_channel.SqliteStore
    moved = "no error"
except ImportError as e:
    moved = str(e)
try:
    agent_channel.open_store("runs.db")
    missing = "no error"
except agent_channel.StoreError as e:
    missing = str(e)
print(json.dumps(
    {"sqlite3": "sqlite3" in sys.modules, "failed": failed, "moved": moved, "missing": missing}
))
"""


def test_the_core_wheel_never_loads_sqlite3_and_its_suite_runs_without_pytest(
    core_venv: tuple[Path, Path], tmp_path: Path
) -> None:
    """The store is a distribution of its own: the core and its testing subpackage need
    neither sqlite3 nor a test framework; a moved name says what to install."""
    _, python = core_venv
    script = tmp_path / "no_sqlite.py"
    script.write_text(NO_SQLITE)
    out = _run(python, "-I", "-W", "ignore::DeprecationWarning", script, cwd=tmp_path).stdout
    result = json.loads(out.strip().splitlines()[-1])
    assert result["sqlite3"] is False
    assert result["failed"] == {}
    assert "pip install" in result["moved"] and "store-sqlite" in result["moved"]
    # Opening a store by its spec finds none installed, and says which to install.
    assert result["missing"].startswith("no store for sqlite:// is installed")
    assert "./packages/store-sqlite" in result["missing"]
