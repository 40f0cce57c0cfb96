"""Models build their validators at first use: the import stays cheap, nothing else changes.

Each check runs in a fresh interpreter, since a model is built once per process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

# Shared by the scripts: every model class the core defines, by name.
MODELS = """
import pydantic
import agent_channel as ac
from agent_channel import _content, _events, _items, _messages

MODULES = (_content, _events, _items, _messages)
MODELS = sorted(
    {
        (m.__name__, name): cls
        for m in MODULES
        for name, cls in vars(m).items()
        if isinstance(cls, type)
        and issubclass(cls, pydantic.BaseModel)
        and cls.__module__ == m.__name__
    }.items()
)
"""

IMPORT_ONLY = (
    MODELS
    + """
print(json.dumps([name for (_, name), cls in MODELS if cls.__pydantic_complete__]))
"""
)

# Valid and invalid input for most shapes, in an order that reaches containers before parts.
WORKLOAD = """
import json
from pydantic import TypeAdapter, ValidationError

def attempt(fn):
    try:
        value = fn()
    except ValidationError as e:
        return {"errors": e.errors(include_url=False)}
    return {"ok": value.model_dump(mode="json")}

out = {}
out["finished"] = attempt(lambda: ac.ExecutionFinished(
    stop_reason="end_turn", undelivered=(ac.UserMessage("hi", id="u"), ac.Cancel("limit", id="k"))))
out["appended"] = attempt(lambda: ac.MessageAppended.model_validate({
    "message": {
        "role": "assistant",
        "id": "m",
        "content": [{"type": "text", "text": "ok"}],
        "tool_calls": [{"id": "c", "name": "edit", "arguments": {"a": [1, {"b": 2}]}}],
    },
    "index": 2}))
out["appended_bad"] = attempt(lambda: ac.MessageAppended.model_validate({
    "message": {"role": "robot", "content": 3}, "index": "x"}))
out["started_bad"] = attempt(lambda: ac.ToolCallStarted(
    tool_call_id="c", name="edit", arguments={1: "x"}, kind="dance"))
out["call_json"] = attempt(
    lambda: ac.ToolCall.model_validate_json('{"id":"c","name":"n","arguments":{"x":[1]}}')
)
out["item"] = attempt(lambda: ac.parse_item({"type": "user_message", "id": "u", "content": "hi"}))
out["item_bad"] = attempt(
    lambda: ac.parse_item({"type": "user_message", "content": "hi", "extra": 1})
)
out["usage"] = attempt(lambda: ac.Usage(input_tokens=1) + ac.Usage(output_tokens=2))
out["part_bad"] = attempt(lambda: ac.ContentImage(mime_type=None))
adapter = TypeAdapter(ac.ExecutionEvent)
out["event_json"] = adapter.dump_python(adapter.validate_json(
    '{"type":"turn_cancelled","cancel":{"type":"cancel","id":"k","reason":"system"}}'), mode="json")
out["schemas"] = {name: cls.model_json_schema() for (_, name), cls in MODELS}
out["event_schema"] = adapter.json_schema()
print(json.dumps(out, sort_keys=True, default=repr))
"""

EAGER = """
for _, cls in MODELS:  # what defining them used to do: build every model before any use
    cls.model_rebuild(force=True)
"""

THREADS = """
import sys, threading
sys.setswitchinterval(1e-6)
barrier = threading.Barrier(8)
results, failures = [], []

def first_use():
    barrier.wait()
    try:
        results.append(run())
    except BaseException as e:
        failures.append(repr(e))

def run():
    call = ac.ToolCall(id="c", name="edit", arguments={"a": [1]})
    return json.dumps([
        ac.UserMessage("hi", id="u").model_dump_json(),
        ac.Cancel("limit", id="k").model_dump_json(),
        ac.parse_item({"type": "cancel", "id": "k2"}).model_dump_json(),
        ac.ToolCallStarted(tool_call_id="c", name="e", arguments=call.arguments).model_dump_json(),
        ac.MessageAppended(
            message=ac.ChatMessageAssistant(id="m", tool_calls=(call,)), index=0
        ).model_dump_json(),
        ac.ItemsDrained(items=(ac.UserMessage("x", id="x"),)).model_dump_json(),
    ])

threads = [threading.Thread(target=first_use) for _ in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps({"failures": failures, "distinct": sorted(set(results)), "n": len(results)}))
"""


def run_fresh(*parts: str) -> Any:
    code = "import json\n" + "".join(parts)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_importing_the_core_builds_no_model() -> None:
    assert run_fresh(IMPORT_ONLY) == []


def test_models_built_at_first_use_validate_serialise_and_describe_themselves_the_same() -> None:
    lazy = run_fresh(MODELS, WORKLOAD)
    all_built = "assert all(cls.__pydantic_complete__ for _, cls in MODELS)\n"
    eager = run_fresh(MODELS, EAGER, all_built, WORKLOAD)
    assert lazy == eager
    assert "ok" in lazy["appended"] and "errors" in lazy["appended_bad"]


@pytest.mark.parametrize("attempt", range(4))
def test_threads_that_all_use_a_model_first_at_once_get_one_right_answer(attempt: int) -> None:
    out = run_fresh(MODELS, THREADS)
    assert out["failures"] == []
    assert out["n"] == 8 and len(out["distinct"]) == 1
