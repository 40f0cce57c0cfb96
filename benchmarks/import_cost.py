"""What ``import agent_channel`` costs, and what the first use after it costs; prints JSON.

    uv run python benchmarks/import_cost.py [--rounds N] [--compare [NAME=]SRC_DIR ...]

Every figure is a fresh interpreter (``sys.executable -c ...``), the cases run
round-robin so a busy machine slows them alike, and each is reported as best and
median of ``--rounds``. Start-up is taken out by also timing an empty interpreter:

    net(case)  = wall(case) - wall(empty)        (best of N with best of N; median with median)
    ratio      = net(import agent_channel) / net(import pydantic, anyio)

``import pydantic`` alone is lazy (it does not load ``pydantic.main``), so the
target's baseline is cheap; ``from pydantic import BaseModel`` is printed too, as
the floor any package defining a model pays, and so is ``the same modules``: every
module ``import agent_channel`` loads (pydantic's, anyio's, the standard library's)
but agent_channel's own, imported in the same order. The core's own cost (its module
bodies: class creation and any model built at import) is ``own_ms``: ``import
agent_channel`` timed inside an interpreter that has already imported all of those.

Bytecode is cached in a throwaway ``PYTHONPYCACHEPREFIX`` (warmed once before
measuring), so compiling sources is not what is measured even where
``PYTHONDONTWRITEBYTECODE`` is set.

Each case also times itself inside its interpreter (``in_process``; start-up excluded,
which is steadier on a busy machine), and the ratios are given both ways:

    in-process ratio = inside(import agent_channel) / inside(import pydantic, anyio)

``first_use_ms`` is measured inside the interpreter after the import: opening a channel
and running one observed turn (an item posted and drained, a scope, the seven events of
a model call with one tool call, published to a subscriber, and all eleven events
serialised), i.e. where the work the lazy import saved is paid. Its baseline is the same
turn written directly on pydantic and anyio (models of the same shapes defined in the
script, one cancel scope, the events kept in a list), after ``import pydantic, anyio``:

    import + first use ratio = (import + first use)[agent_channel] / (the same)[baseline]

``import agent_channel`` alone loads no submodule (each public name loads its module when
first used), so ``from agent_channel import open_channel`` (the channel, items and
errors; no events) is timed too.
``--compare`` (repeatable) runs the same cases with ``PYTHONPATH=SRC_DIR`` (an older
checkout's ``packages/channel-core/src``) side by side, e.g. after
``git worktree add /tmp/perf-before <commit>``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

FIRST_USE = """
import time
t = time.perf_counter()
import agent_channel as ac
t_import = time.perf_counter() - t
t = time.perf_counter()
import anyio
import anyio.lowlevel

async def turn():
    async with ac.open_channel() as ch:
        ref = ch.ref()
        seen = []
        ref.subscribe(seen.append)
        ref.post(ac.UserMessage("hi"))
        ch.drain()
        with ch.scope():
            await anyio.lowlevel.checkpoint()
            call = ac.ToolCall(id="c1", name="edit", arguments={"path": "a.py", "lines": [1, 2]})
            msg = ac.ChatMessageAssistant(content="ok", tool_calls=(call,), model="m")
            tool = ac.ChatMessageTool(tool_call_id="c1", content="done")
            for event in (
                ac.ModelCallStarted(call_id="m1", model="m"),
                ac.ModelDelta(call_id="m1", message_id=msg.id, kind="text", text="ok"),
                ac.ModelCallFinished(call_id="m1", message=msg, stop_reason="end_turn",
                                     usage=ac.Usage()),
                ac.MessageAppended(message=msg, index=1),
                ac.ToolCallStarted(tool_call_id="c1", name="edit", arguments=call.arguments),
                ac.ToolCallFinished(tool_call_id="c1", name="edit", status="completed",
                                    content="done"),
                ac.MessageAppended(message=tool, index=2),
            ):
                ch.publish(event)
    return [e.model_dump_json() for e in seen]

assert len(anyio.run(turn)) == 11, "items drained, turn started, 7 events, turn ended, finished"
t_first = time.perf_counter() - t
print(t_import, t_first)
"""

BASELINE_FIRST_USE = """
import time
t = time.perf_counter()
import pydantic, anyio
t_import = time.perf_counter() - t
t = time.perf_counter()
# The same turn written directly on pydantic and anyio: frozen models of the same shapes
# (defined here, as such a program would), one cancel scope, the same events in a list.
from typing import Any, Literal
import anyio.lowlevel
from pydantic import BaseModel, ConfigDict, Field

class M(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
class UserMessage(M):
    type: Literal["user_message"] = "user_message"
    id: str = "u1"
    content: str
    source: str = "operator"
class ToolCall(M):
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
class Assistant(M):
    role: Literal["assistant"] = "assistant"
    id: str = "a1"
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    model: str | None = None
class Tool(M):
    role: Literal["tool"] = "tool"
    id: str = "t1"
    content: str = ""
    tool_call_id: str
class Usage(M):
    input_tokens: int = 0
    output_tokens: int = 0
class ItemsDrained(M):
    items: tuple[UserMessage, ...]
class TurnStarted(M):
    type: Literal["turn_started"] = "turn_started"
class TurnEnded(M):
    error: str | None = None
class ModelCallStarted(M):
    call_id: str
    model: str | None = None
class ModelDelta(M):
    call_id: str
    message_id: str
    kind: Literal["text", "reasoning"]
    text: str
class ModelCallFinished(M):
    call_id: str
    message: Assistant | None = None
    stop_reason: str | None = None
    usage: Usage | None = None
class MessageAppended(M):
    message: Assistant | Tool = Field(discriminator="role")
    index: int
class ToolCallStarted(M):
    tool_call_id: str
    name: str
    arguments: dict[str, Any]
class ToolCallFinished(M):
    tool_call_id: str
    name: str
    status: Literal["completed", "failed", "cancelled"]
    content: str = ""
class ExecutionFinished(M):
    stop_reason: str | None = None
    undelivered: tuple[UserMessage, ...] = ()

async def turn():
    seen = [ItemsDrained(items=(UserMessage(content="hi"),)), TurnStarted()]
    with anyio.CancelScope():
        await anyio.lowlevel.checkpoint()
        call = ToolCall(id="c1", name="edit", arguments={"path": "a.py", "lines": [1, 2]})
        msg = Assistant(content="ok", tool_calls=(call,), model="m")
        seen += [
            ModelCallStarted(call_id="m1", model="m"),
            ModelDelta(call_id="m1", message_id=msg.id, kind="text", text="ok"),
            ModelCallFinished(call_id="m1", message=msg, stop_reason="end_turn", usage=Usage()),
            MessageAppended(message=msg, index=1),
            ToolCallStarted(tool_call_id="c1", name="edit", arguments=call.arguments),
            ToolCallFinished(tool_call_id="c1", name="edit", status="completed", content="done"),
            MessageAppended(message=Tool(tool_call_id="c1", content="done"), index=2),
        ]
    seen += [TurnEnded(), ExecutionFinished()]
    return [e.model_dump_json() for e in seen]

assert len(anyio.run(turn)) == 11
t_first = time.perf_counter() - t
print(t_import, t_first)
"""

CASES = {
    "empty": "pass",
    "import pydantic, anyio": "import pydantic, anyio",
    "from pydantic import BaseModel; import anyio": "from pydantic import BaseModel; import anyio",
    "import agent_channel": "import agent_channel",
    "from agent_channel import open_channel": "from agent_channel import open_channel",
}
"""Timed in fresh interpreters; the two agent_channel cases once per source tree."""
CORE_CASES = ("import agent_channel", "from agent_channel import open_channel")


DEPENDENCIES = """
import json, sys
before = set(sys.modules)
import agent_channel
new = [m for m in sys.modules if m not in before]
print(json.dumps([m for m in new if m.split(".")[0] != "agent_channel"]))
"""


def same_modules(env: dict[str, str]) -> str:
    """Code importing what ``import agent_channel`` imports, in its order, but not the core."""
    modules = json.loads(run(DEPENDENCIES, env)[1])
    return f"import importlib\nfor m in {modules!r}:\n    importlib.import_module(m)\n"


OWN = """
import time
t = time.perf_counter()
import agent_channel
print(time.perf_counter() - t)
"""


def timed(code: str) -> str:
    """``code`` printing how long it took inside the interpreter (start-up excluded)."""
    return f"import time\n_t0 = time.perf_counter()\n{code}\nprint(time.perf_counter() - _t0)\n"


def run(code: str, env: dict[str, str]) -> tuple[float, str]:
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if r.returncode:
        raise SystemExit(f"{code!r} failed:\n{r.stderr}")
    return wall, r.stdout


def summary(xs: list[float]) -> dict[str, float]:
    return {"best_ms": min(xs) * 1e3, "median_ms": statistics.median(xs) * 1e3}


def rounded(value: object) -> object:
    if isinstance(value, float):
        return round(value, 3)
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}  # pyright: ignore[reportUnknownVariableType]
    return value


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument(
        "--compare",
        action="append",
        default=[],
        metavar="[NAME=]SRC_DIR",
        help="also measure this core source tree (repeatable)",
    )
    args = parser.parse_args()

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE",)}
    env["PYTHONPYCACHEPREFIX"] = tempfile.mkdtemp(prefix="agent-channel-import-")
    trees: dict[str, dict[str, str]] = {"current": env}
    for spec in args.compare:
        name, _, src = spec.rpartition("=")
        trees[name or src] = {**env, "PYTHONPATH": str(Path(src).resolve())}

    jobs: list[tuple[str, str, dict[str, str]]] = [
        (name, timed(code), env) for name, code in CASES.items() if name not in CORE_CASES
    ]
    jobs.append(("first use [pydantic, anyio]", BASELINE_FIRST_USE, env))
    for tree, tenv in trees.items():
        for case in CORE_CASES:
            jobs.append((f"{case} [{tree}]", timed(CASES[case]), tenv))
        jobs.append((f"first use [{tree}]", FIRST_USE, tenv))
        deps = same_modules(tenv)
        jobs.append((f"the same modules [{tree}]", timed(deps), tenv))
        jobs.append((f"own [{tree}]", deps + OWN, tenv))
    walls: dict[str, list[float]] = {name: [] for name, _, _ in jobs}
    inside: dict[str, list[float]] = {name: [] for name, _, _ in jobs}  # first number printed
    first_use: dict[str, list[float]] = {name: [] for name, _, _ in jobs}
    for _ in range(2):  # warm the bytecode cache and the OS file cache
        for _, code, jenv in jobs:
            run(code, jenv)
    for _ in range(args.rounds):
        for name, code, jenv in jobs:
            wall, out = run(code, jenv)
            walls[name].append(wall)
            numbers = [float(x) for x in out.split()]
            inside[name].append(numbers[0])
            if name.startswith("first use"):
                first_use[name].append(numbers[1])

    result: dict[str, object] = {"python": sys.version.split()[0], "rounds": args.rounds}
    result["wall"] = {name: summary(xs) for name, xs in walls.items()}
    empty = walls["empty"]

    def net(name: str) -> dict[str, float]:
        return {
            "best_ms": (min(walls[name]) - min(empty)) * 1e3,
            "median_ms": (statistics.median(walls[name]) - statistics.median(empty)) * 1e3,
        }

    base = net("import pydantic, anyio")
    base_in = summary(inside["import pydantic, anyio"])
    result["net_of_empty_interpreter"] = {n: net(n) for n in walls if n != "empty"}
    result["in_process"] = {n: summary(xs) for n, xs in inside.items() if n != "empty"}
    wall_ratios: dict[str, float] = {}
    in_ratios: dict[str, float] = {}
    cases = [f"{case} [{tree}]" for tree in trees for case in CORE_CASES]
    cases += ["from pydantic import BaseModel; import anyio", "the same modules [current]"]
    for case in cases:
        for stat in ("best", "median"):
            key = f"{case} / import pydantic, anyio ({stat})"
            wall_ratios[key] = net(case)[f"{stat}_ms"] / base[f"{stat}_ms"]
            in_ratios[key] = summary(inside[case])[f"{stat}_ms"] / base_in[f"{stat}_ms"]
    result["ratios (wall - empty interpreter)"] = wall_ratios
    result["ratios (in-process)"] = in_ratios

    def with_first_use(name: str) -> dict[str, float]:
        """In-process import + first use: best of the sums, and the median sum."""
        sums = [a + b for a, b in zip(inside[name], first_use[name], strict=True)]
        return summary(sums)

    baseline_total = with_first_use("first use [pydantic, anyio]")
    result["first use [pydantic, anyio] (the same turn on pydantic and anyio directly)"] = {
        "first_use_ms": summary(first_use["first use [pydantic, anyio]"]),
        "import_plus_first_use_ms": baseline_total,
    }
    for tree in trees:
        total = with_first_use(f"first use [{tree}]")
        result[f"core [{tree}]"] = {
            "first_use_ms (open a channel, one observed turn)": summary(
                first_use[f"first use [{tree}]"]
            ),
            "import_plus_first_use_ms": total,
            "import + first use / pydantic, anyio + the same turn (best)": total["best_ms"]
            / baseline_total["best_ms"],
            "import + first use / pydantic, anyio + the same turn (median)": total["median_ms"]
            / baseline_total["median_ms"],
            "own_ms (import agent_channel after every other module it loads)": summary(
                inside[f"own [{tree}]"]
            ),
        }
    key = "import agent_channel [current] / import pydantic, anyio (best)"
    first_key = "import + first use / pydantic, anyio + the same turn (best)"
    current: Any = result["core [current]"]
    result["targets"] = {
        "import agent_channel <= 1.5x import pydantic, anyio (wall - empty, best)": wall_ratios[key]
        <= 1.5,
        "the same, in-process": in_ratios[key] <= 1.5,
        "(no target) import + first use, in-process best": round(current[first_key], 3),
    }
    print(json.dumps(rounded(result), indent=2))


if __name__ == "__main__":
    main()
