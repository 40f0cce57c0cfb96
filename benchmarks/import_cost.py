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

``first_use_ms`` is measured inside the interpreter after the import: building one
of every event an observed turn publishes (with a tool call, a message and items)
and serialising them, i.e. where the work a lazy build saved at import is paid.
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

FIRST_USE = """
import time
t = time.perf_counter()
import agent_channel as ac
t_import = time.perf_counter() - t
t = time.perf_counter()
call = ac.ToolCall(id="c1", name="edit", arguments={"path": "a.py", "lines": [1, 2]})
msg = ac.ChatMessageAssistant(content="ok", tool_calls=(call,), model="m")
events = [
    ac.TurnStarted(),
    ac.ItemsDrained(items=(ac.UserMessage("hi"), ac.Cancel())),
    ac.ModelCallStarted(call_id="m1", model="m"),
    ac.ModelDelta(call_id="m1", message_id="x", kind="text", text="ok"),
    ac.ModelCallFinished(call_id="m1", message=msg, stop_reason="end_turn", usage=ac.Usage()),
    ac.MessageAppended(message=msg, index=1),
    ac.ToolCallStarted(tool_call_id="c1", name="edit", arguments=call.arguments, kind="edit"),
    ac.ToolCallFinished(tool_call_id="c1", name="edit", status="completed", content="done"),
    ac.MessageAppended(message=ac.ChatMessageTool(tool_call_id="c1", content="done"), index=2),
    ac.TurnEnded(),
    ac.AwaitingInput(),
    ac.ExecutionFinished(stop_reason="end_turn"),
]
dumped = [e.model_dump_json() for e in events]
ac.parse_item({"type": "user_message", "content": "again"})
t_first = time.perf_counter() - t
print(t_import, t_first)
"""

CASES = {
    "empty": "pass",
    "import pydantic, anyio": "import pydantic, anyio",
    "from pydantic import BaseModel; import anyio": "from pydantic import BaseModel; import anyio",
    "import agent_channel": "import agent_channel",
}


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
        (name, timed(code), env) for name, code in CASES.items() if name != "import agent_channel"
    ]
    for tree, tenv in trees.items():
        jobs.append((f"import agent_channel [{tree}]", timed(CASES["import agent_channel"]), tenv))
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
    cases = [f"import agent_channel [{tree}]" for tree in trees]
    cases += ["from pydantic import BaseModel; import anyio", "the same modules [current]"]
    for case in cases:
        for stat in ("best", "median"):
            key = f"{case} / import pydantic, anyio ({stat})"
            wall_ratios[key] = net(case)[f"{stat}_ms"] / base[f"{stat}_ms"]
            in_ratios[key] = summary(inside[case])[f"{stat}_ms"] / base_in[f"{stat}_ms"]
    result["ratios (wall - empty interpreter)"] = wall_ratios
    result["ratios (in-process)"] = in_ratios
    for tree in trees:
        imp, first = inside[f"first use [{tree}]"], first_use[f"first use [{tree}]"]
        result[f"core [{tree}]"] = {
            "first_use_ms": summary(first),
            "import_plus_first_use_best_ms": 1e3
            * min(a + b for a, b in zip(imp, first, strict=True)),
            "own_ms (import agent_channel after every other module it loads)": summary(
                inside[f"own [{tree}]"]
            ),
        }
    key = "import agent_channel [current] / import pydantic, anyio (best)"
    result["targets"] = {
        "import agent_channel <= 1.5x import pydantic, anyio (wall - empty, best)": wall_ratios[key]
        <= 1.5,
        "the same, in-process": in_ratios[key] <= 1.5,
    }
    print(json.dumps(rounded(result), indent=2))


if __name__ == "__main__":
    main()
