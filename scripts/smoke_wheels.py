"""Install each built wheel alone into a fresh venv and run its smallest example there.

    python3 scripts/smoke_wheels.py DIST_DIR

- core: only its wheel (pip brings anyio and pydantic); the core README's agent, driven
  by a runtime: a message answered through a tool, then a stop in the middle of the tool;
- react: its wheel and the core's; the react README's quickstart prints ``42 submitted``;
- acp: its wheel, the core's and the SQLite store's (pip brings the ACP SDK);
  ``agent-channel-acp --version``, then the core README's agent served over stdio to the
  SDK's client;
- pydantic-ai: its wheel and the core's (pip brings pydantic-ai-slim); docs/examples/weather.py,
  a plain pydantic-ai agent, found by the adapter's entry point and run on a channel, answers;
- openai-agents: its wheel and the core's (pip brings openai-agents); docs/examples/support.py,
  a plain Agents SDK agent, found by the adapter's entry point and run on a channel, answers;
- langgraph: its wheel and the core's (pip brings langgraph); docs/examples/forecast.py, a
  plain compiled LangGraph graph, found by the adapter's entry point and run on a channel,
  answers;
- ray: its wheel and the core's (pip brings ray, ~200 MB installed: from uv's cache in CI);
  the ray README's quickstart starts a local cluster, runs its body in an actor and prints
  ``heard: hello``;
- sqlite: its wheel and the core's (nothing else); the sqlite README's example, run twice:
  the second run restores the message the first was sent before it died.
- postgres: its wheel and the core's (pip brings psycopg and its binary libpq); the core's
  ``open_store`` finds it by its URL scheme and an unreachable server is refused in one line
  (libpq from the wheel at work); then, where PostgreSQL's binaries are on the machine (CI:
  required), the package's ``TemporaryServer`` starts one and the postgres README's example
  runs twice against it: the second run restores the message the first was sent.

What runs is read out of the READMEs (``examples.py``), so what a reader copies is what
was run. No venv sees the workspace: each interpreter runs with ``-E -s`` and an
environment without PYTHONPATH. Needs ``uv`` on PATH (or in $UV); stdlib only.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from examples import example

CORE_CLOSURE = {
    *("anyio", "idna", "sniffio", "typing-extensions", "exceptiongroup"),
    *("pydantic", "pydantic-core", "annotated-types", "typing-inspection"),
}
"""What the core's two dependencies may bring (any supported platform)."""

TIMEOUT = 300
"""Seconds one install or example may take before it counts as hung (a guard, not a goal)."""

CORE_DRIVER = r"""
import json, sys
import anyio
import agent_channel
from agent_channel import AwaitingInput, Cancel, ToolCallStarted, TurnCancelled, UserMessage
from agent_channel import content_text, open_channel
from letters import factory


async def main():
    seen = []
    changed = anyio.Event()

    def on_event(event):
        nonlocal changed
        seen.append(type(event).__name__)
        changed.set()
        changed = anyio.Event()

    async def until(name, count):
        while seen.count(name) < count:
            await changed.wait()

    with anyio.fail_after(30):  # a hang guard
        async with open_channel() as ch, anyio.create_task_group() as tg:
            ref = ch.ref()
            ref.subscribe(on_event)
            tg.start_soon(factory(None))
            await until("AwaitingInput", 1)
            ref.post(UserMessage("count otter"))
            await until("AwaitingInput", 2)
            ref.post(UserMessage("count badger"))
            await until("ToolCallStarted", 2)
            ref.interrupt(Cancel("user_cancel"))
            await until("TurnCancelled", 1)
            texts = [content_text(m.content) for m in ref.messages()]
            tg.cancel_scope.cancel()
    print(json.dumps({"core": agent_channel.__file__, "texts": texts, "events": seen}))


anyio.run(main)
"""

ACP_CLIENT = r"""
import asyncio, json, os, sys
import acp


class Client:
    def __init__(self):
        self.updates = []

    async def session_update(self, session_id, update, **kwargs):
        self.updates.append(update.model_dump(mode="json", by_alias=True, exclude_none=True))

    async def request_permission(self, *args, **kwargs):
        raise RuntimeError("not asked for")


async def main(command):
    client = Client()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = os.getcwd()  # letters.py, and nothing of the workspace
    async with acp.spawn_agent_process(
        client, command, "stdio", "--agent", "letters:factory",
        env=env, transport_kwargs={"stderr": None},
    ) as (conn, proc):
        await asyncio.wait_for(conn.initialize(protocol_version=1), 30)
        session = await asyncio.wait_for(conn.new_session(cwd=os.getcwd(), mcp_servers=[]), 30)
        answer = await asyncio.wait_for(
            conn.prompt(session_id=session.session_id, prompt=[acp.text_block("count otter")]), 30
        )
    kinds = [u["sessionUpdate"] for u in client.updates]
    text = "".join(
        u["content"]["text"] for u in client.updates if u["sessionUpdate"] == "agent_message_chunk"
    )
    cards = [u["title"] for u in client.updates if u["sessionUpdate"] == "tool_call"]
    print(json.dumps({"stop": answer.stop_reason, "kinds": kinds, "text": text, "cards": cards}))


asyncio.run(main(sys.argv[1]))
"""


def _uv() -> str:
    uv = os.environ.get("UV") or shutil.which("uv")
    if not uv:
        sys.exit("smoke_wheels: uv is required on PATH (or in $UV)")
    return uv


def _env() -> dict[str, str]:
    drop = {"PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "UV_PROJECT_ENVIRONMENT"}
    return {k: v for k, v in os.environ.items() if k not in drop}


def _run(*args: str | Path, cwd: Path) -> str:
    shown = " ".join(str(a) for a in args)
    result = subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        stdin=subprocess.DEVNULL,
    )
    if result.returncode != 0:
        sys.exit(
            f"smoke_wheels: failed ({result.returncode}): {shown}\n{result.stdout}{result.stderr}"
        )
    return result.stdout


def _venv(work: Path, name: str, wheels: list[Path]) -> Path:
    """A fresh venv on this interpreter with only ``wheels`` and what they require."""
    venv = work / name
    _run(_uv(), "venv", "--no-config", "--quiet", "--python", sys.executable, venv, cwd=work)
    python = venv / "bin" / "python"
    _run(_uv(), "pip", "install", "--no-config", "--quiet", "--python", python, *wheels, cwd=work)
    return python


def _installed(python: Path, cwd: Path) -> set[str]:
    listed = _run(_uv(), "pip", "list", "--python", python, "--format", "json", cwd=cwd)
    return {p["name"].lower() for p in json.loads(listed)}


def _check(ok: bool, what: str, detail: object) -> None:
    if not ok:
        sys.exit(f"smoke_wheels: {what}: {detail}")


def smoke_core(work: Path, core: Path) -> str:
    folder = work / "core-example"
    folder.mkdir()
    python = _venv(work, "core-venv", [core])
    installed = _installed(python, folder)
    _check(
        "anyio" in installed and "pydantic" in installed,
        "core venv lacks its dependencies",
        installed,
    )
    strays = installed & {
        "agent-channel-react",
        "agent-channel-acp",
        "agent-client-protocol",
        "openai",
    }
    _check(not strays, "the core wheel pulled in", strays)
    (folder / "letters.py").write_text(example("core-agent"))
    (folder / "drive.py").write_text(CORE_DRIVER)
    result = json.loads(_run(python, "-E", "-s", "drive.py", cwd=folder).splitlines()[-1])
    _check(
        result["core"].startswith(str(python.parent.parent)),
        "imported the core from",
        result["core"],
    )
    _check("Done: 'otter' has 5 letters." in result["texts"], "no answer for otter", result)
    _check("TurnCancelled" in result["events"], "the stop did not cancel the turn", result)
    return f"core: {len(installed)} distributions; the README agent answered and was stopped"


def smoke_react(work: Path, core: Path, react: Path) -> str:
    folder = work / "react-example"
    folder.mkdir()
    python = _venv(work, "react-venv", [react, core])
    installed = _installed(python, folder)
    strays = installed & {"agent-channel-acp", "agent-client-protocol", "openai"}
    _check(not strays, "the react wheel pulled in", strays)
    (folder / "quickstart.py").write_text(example("react-quickstart"))
    out = _run(python, "-E", "-s", "quickstart.py", cwd=folder).strip().splitlines()
    _check(out[-1:] == ["42 submitted"], "the react quickstart printed", out)
    return f"react: {len(installed)} distributions; the README quickstart printed '42 submitted'"


def smoke_acp(work: Path, core: Path, acp: Path, sqlite: Path, version: str) -> str:
    folder = work / "acp-example"
    folder.mkdir()
    python = _venv(work, "acp-venv", [acp, core, sqlite])  # --store: the SQLite store's wheel
    installed = _installed(python, folder)
    _check("agent-client-protocol" in installed, "no ACP SDK in the acp venv", installed)
    _check("agent-channel-react" not in installed, "the acp wheel pulled in react", installed)
    command = python.parent / "agent-channel-acp"
    shown = _run(command, "--version", cwd=folder).strip()
    _check(shown == f"agent-channel-acp {version}", "--version printed", shown)
    (folder / "letters.py").write_text(example("core-agent"))
    (folder / "client.py").write_text(ACP_CLIENT)
    result = json.loads(_run(python, "-E", "-s", "client.py", command, cwd=folder).splitlines()[-1])
    _check(result["stop"] == "end_turn", "the prompt ended", result)
    _check("Done: 'otter' has 5 letters." in result["text"], "the client was not shown", result)
    _check(result["cards"] == ["Counting 'otter'"], "tool cards", result)
    return f"acp: {len(installed)} distributions; {shown}; the README agent served over stdio"


def _beside_core(
    work: Path, name: str, wheel: Path, core: Path, needs: str
) -> tuple[Path, Path, set[str]]:
    """A venv of ``wheel`` and the core's alone, and its folder: ``needs`` came, and nothing
    of the producer or the ReAct loop did. Returns the folder, the python and what is installed."""
    folder = work / f"{name}-example"
    folder.mkdir()
    python = _venv(work, f"{name}-venv", [wheel, core])
    installed = _installed(python, folder)
    _check(needs in installed, f"no {needs} in the {name} venv", installed)
    strays = installed & {"agent-channel-react", "agent-channel-acp", "agent-client-protocol"}
    _check(not strays, f"the {name} wheel pulled in", strays)
    return folder, python, installed


ADAPTER_DRIVER = r"""
import json
from importlib.metadata import entry_points
import anyio
from agent_channel import UserMessage, open_channel
import {module}


async def main():
    (ep,) = [e for e in entry_points(group="agent_channel.adapters") if e.name == "{name}"]
    make = ep.load()({module}.{agent})  # what the producer does with --agent {module}:{agent}
    {module}.{wait} = 0
    with anyio.fail_after(30):  # a hang guard
        async with open_channel() as ch:
            ref = ch.ref()
            ref.post(UserMessage("{ask}"))
            await make(None)()  # not live: it ends once the prompt is answered
            texts = [m.text for m in ref.messages()]
    import {package}
    print(json.dumps({{"texts": texts, "adapter": {package}.__file__}}))


anyio.run(main)
"""


@dataclass(frozen=True)
class AdapterSmoke:
    """One adapter's wheel smoke: its docs example served through its entry point."""

    name: str
    """The entry point's name (and the venv's)."""
    framework: str
    """The distribution the wheel must pull in."""
    example: str
    """The example's name in ``scripts/examples.py``."""
    module: str
    agent: str
    """The example's module and the framework object in it."""
    wait: str
    """The example's simulated wait, set to 0."""
    ask: str
    answer: str
    package: str
    """The adapter's import name."""


ADAPTERS = (
    AdapterSmoke("pydantic-ai", "pydantic-ai-slim", "pydantic-ai-weather", "weather", "agent",
                 "forecast_seconds", "weather in Paris", "It is sunny in Paris.",
                 "agent_channel_pydantic_ai"),
    AdapterSmoke("openai-agents", "openai-agents", "openai-agents-support", "support", "agent",
                 "lookup_seconds", "where is order 42", "Your order 42 has shipped.",
                 "agent_channel_openai_agents"),
    AdapterSmoke("langgraph", "langgraph", "langgraph-forecast", "forecast", "graph",
                 "forecast_seconds", "weather in Paris", "It is sunny in Paris.",
                 "agent_channel_langgraph"),
)  # fmt: skip


def smoke_adapter(work: Path, core: Path, adapter: Path, smoke: AdapterSmoke) -> str:
    folder, python, installed = _beside_core(work, smoke.name, adapter, core, smoke.framework)
    (folder / f"{smoke.module}.py").write_text(example(smoke.example))
    (folder / "drive.py").write_text(ADAPTER_DRIVER.format(**vars(smoke)))
    result = json.loads(_run(python, "-E", "-s", "drive.py", cwd=folder).splitlines()[-1])
    _check(result["adapter"].startswith(str(python.parent.parent)), "adapter from", result)
    _check(result["texts"][-1] == smoke.answer, "the example answered", result)
    return f"{smoke.name}: {len(installed)} distributions; the example agent answered"


def smoke_ray(work: Path, core: Path, ray_wheel: Path) -> str:
    folder, python, installed = _beside_core(work, "ray", ray_wheel, core, "ray")
    (folder / "quickstart.py").write_text(example("ray-quickstart"))
    out = _run(python, "-E", "-s", "quickstart.py", cwd=folder).strip().splitlines()
    _check("heard: hello" in out, "the ray quickstart printed", out)
    return f"ray: {len(installed)} distributions; the README quickstart printed 'heard: hello'"


def smoke_sqlite(work: Path, core: Path, sqlite: Path) -> str:
    folder = work / "sqlite-example"
    folder.mkdir()
    python = _venv(work, "sqlite-venv", [sqlite, core])
    installed = _installed(python, folder)
    strays = installed - {"agent-channel-sqlite", "agent-channel-core", *CORE_CLOSURE}
    _check(not strays, "the sqlite wheel pulled in", strays)
    (folder / "durable.py").write_text(example("sqlite-durable"))
    first = _run(python, "-E", "-s", "durable.py", cwd=folder).strip()
    _check(first == "", "the first run printed", first)
    out = _run(python, "-E", "-s", "durable.py", cwd=folder).strip().splitlines()
    _check(out[-1:] == ["restored: ['are you there?']"], "the second run printed", out)
    return f"sqlite: {len(installed)} distributions; the README example restored its message"


POSTGRES_DRIVER = r"""
import os, subprocess, sys
from agent_channel import StoreError, open_store
from agent_channel_postgres.testing import TemporaryServer, find_binaries

try:
    open_store("postgresql://smoke:n0t-sh0wn@127.0.0.1:1/nowhere")
except StoreError as e:
    line = str(e)
    assert "\n" not in line and "n0t-sh0wn" not in line and "cannot be opened" in line, line
    print("refused in one line")
if find_binaries() is None:
    if os.environ.get("CI") == "true":
        sys.exit("no PostgreSQL binaries: CI must run the postgres README's example")
    print("no PostgreSQL binaries here: the example was not run")
    sys.exit(0)
with TemporaryServer(fsync=False) as server:
    env = dict(os.environ, STORE_URL=server.create_database("smoke"))
    for _ in range(2):
        run = subprocess.run(
            [sys.executable, "-E", "-s", "shared.py"], env=env, capture_output=True, text=True,
            timeout=120,
        )
        assert run.returncode == 0, run.stderr
        print(run.stdout.strip())
"""


def smoke_postgres(work: Path, core: Path, postgres: Path) -> str:
    folder = work / "postgres-example"
    folder.mkdir()
    python = _venv(work, "postgres-venv", [postgres, core])
    installed = _installed(python, folder)
    allowed = {"agent-channel-postgres", "agent-channel-core", "psycopg", "psycopg-binary"}
    strays = installed - allowed - CORE_CLOSURE - {"tzdata"}
    _check(not strays, "the postgres wheel pulled in", strays)
    (folder / "shared.py").write_text(example("postgres-shared"))
    (folder / "driver.py").write_text(POSTGRES_DRIVER)
    out = _run(python, "-E", "-s", "driver.py", cwd=folder).strip().splitlines()
    _check(out[:1] == ["refused in one line"], "the unreachable store printed", out)
    if out[1:2] == ["no PostgreSQL binaries here: the example was not run"]:
        return f"postgres: {len(installed)} distributions; refused in one line (no server here)"
    _check(out[-1:] == ["restored: ['are you there?']"], "the second run printed", out)
    return f"postgres: {len(installed)} distributions; the README example restored its message"


def main(dist: Path) -> None:
    def wheel(name: str) -> Path:
        (found,) = dist.glob(f"{name}-*-py3-none-any.whl")
        return found

    core, react, acp, ray_wheel, sqlite, postgres = (
        wheel("agent_channel_core"),
        wheel("agent_channel_react"),
        wheel("agent_channel_acp"),
        wheel("agent_channel_ray"),
        wheel("agent_channel_sqlite"),
        wheel("agent_channel_postgres"),
    )
    version = acp.name.split("-")[1]
    with tempfile.TemporaryDirectory(prefix="smoke-wheels-") as tmp:
        work = Path(tmp)
        smokes = (
            lambda: smoke_core(work, core),
            lambda: smoke_react(work, core, react),
            lambda: smoke_acp(work, core, acp, sqlite, version),
            lambda: smoke_ray(work, core, ray_wheel),
            lambda: smoke_sqlite(work, core, sqlite),
            lambda: smoke_postgres(work, core, postgres),
            *(partial(smoke_adapter, work, core, wheel(s.package), s) for s in ADAPTERS),
        )
        # They are independent and mostly wait on subprocesses: run them side by side.
        # A failure (SystemExit from _check) is raised again by result(), in order.
        started = time.monotonic()
        with ThreadPoolExecutor(len(smokes)) as pool:
            for future in [pool.submit(smoke) for smoke in smokes]:
                print(f"ok   {future.result()}")
        print(f"all {len(smokes)} in {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(Path(sys.argv[1]).resolve())
