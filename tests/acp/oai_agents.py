"""OpenAI Agents SDK agents for the ACP suites: plain ``agents.Agent`` objects (no wrapper),
served by ``--agent oai_agents:NAME`` through the adapter the producer finds by entry point.

Their model is the SDK's own ``agents.testing.ScriptedModel``, each step answered by a
responder that follows the keywords of ``agents.attach_script`` (this suite's module) on
the last user message: ``gate=NAME`` / ``gates=A,B``, ``block``, ``quick``, ``say=WORD``,
``hang``, ``choose`` / ``free`` (``ask_user``), ``inspect``, ``crash``, anything else
``echo: <text>``. After the tools of a prompt it answers ``results: ...``. Tracing is off:
nothing here touches the network.

The SDK's package is named ``agents``, as this suite's own module is: it is imported with
this folder off ``sys.path`` (a process that imported the suite's module cannot load it).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio

_HERE = Path(__file__).resolve().parent
_path = sys.path[:]
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
try:
    import agents as sdk
    from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
    from agents.testing.model import _stream_events_for_step  # pyright: ignore[reportPrivateUsage]
    from openai.types.responses import ResponseReasoningItem
    from openai.types.responses.response_reasoning_item import Summary
finally:
    sys.path[:] = _path
assert Path(sdk.__file__ or "").resolve().parent != _HERE, "the suite's agents.py shadows the SDK"

from agent_channel_openai_agents import ask_user  # noqa: E402

sdk.set_tracing_disabled(True)

GATES_ENV = "AGENT_CHANNEL_TEST_GATES"
CUT = "Tool call "
"""How the results the adapter writes for stopped calls begin (cancelled, rejected, cut off)."""


@sdk.function_tool
async def gate(name: str) -> str:
    """Wait until the test opens the gate (creates a file named ``name``).

    Args:
        name: The gate's name.
    """
    path = Path(os.environ[GATES_ENV]) / name
    while not path.exists():  # noqa: ASYNC110 (the test process cannot set an in-process event)
        await anyio.sleep(0.01)
    return f"gate {name} opened"


@sdk.function_tool
async def block(why: str) -> str:
    """Wait until cancelled.

    Args:
        why: The prompt that asked for it.
    """
    await anyio.sleep_forever()
    return "unreachable"


@sdk.function_tool
async def quick(why: str) -> str:
    """Answer at once.

    Args:
        why: The prompt that asked for it.
    """
    return "done"


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))


def summary(system: str | None, items: list[dict[str, Any]]) -> list[dict[str, object]]:
    """What the model read, as ``agents.summary`` reports the ReAct model's input: roles,
    texts, tool calls by name (on the assistant entry they follow), results with their error."""
    out: list[dict[str, object]] = [{"role": "system", "text": system}] if system else []
    for i in items:
        kind = i.get("type")
        if i.get("role") == "user":
            content = i.get("content", "")
            entry: dict[str, object] = {"role": "user", "text": _text(content)}
            if not isinstance(content, str):
                entry["parts"] = [
                    "image" if p.get("type") == "input_image" else "text" for p in content
                ]
            out.append(entry)
        elif i.get("role") == "assistant":
            out.append({"role": "assistant", "text": _text(i.get("content", ""))})
        elif kind == "function_call":
            last = out[-1] if out else None
            if last is None or last["role"] != "assistant":
                last = {"role": "assistant", "text": ""}
                out.append(last)
            calls = last.setdefault("tool_calls", [])
            assert isinstance(calls, list)
            calls.append(i["name"])
        elif kind == "function_call_output":
            text = str(i.get("output"))
            error = None
            if text.startswith(CUT):  # as the ReAct loop's repair marks its own
                error = "cancelled" if "cancelled" in text else text
            out.append({"role": "tool", "text": text, "error": error})
    return out


def _since_prompt(items: list[dict[str, Any]]) -> tuple[str, list[str]]:
    text, results = "", []
    names: dict[str, str] = {}
    for i in items:
        if i.get("role") == "user":
            text, results = _text(i.get("content", "")), []
        elif i.get("type") == "function_call":
            names[i["call_id"]] = i["name"]
        elif i.get("type") == "function_call_output":
            out = str(i.get("output"))
            if names.get(i["call_id"]) == "ask_user":
                results.append(f"answer: {out}")
            else:
                results.append(f"{out} ({out if out.startswith(CUT) else None})")
    return text, results


def _call(name: str, args: dict[str, object]) -> Any:
    return function_call(name, args, call_id=f"{name}-{os.urandom(4).hex()}")


async def respond(system: str | None, items: list[dict[str, Any]]) -> Any:
    """The scripted answer to ``items`` (the model's input): output items, or a step."""
    text, results = _since_prompt(items)
    words = text.split()
    if results and results[-1].startswith("answer: "):
        return [assistant_message(results[-1])]
    if results:
        return [assistant_message("results: " + "; ".join(results))]
    for w in words:
        if w.startswith("gate="):
            return [_call("gate", {"name": w[5:]})]
        if w.startswith("gates="):
            a, b = w[6:].split(",")
            return [_call("gate", {"name": a}), _call("gate", {"name": b})]
        if w.startswith("say="):
            return [assistant_message(w[4:])]
    for name in ("block", "quick"):
        if name in words:
            return [assistant_message(f"calling {name}"), _call(name, {"why": text})]
    if "handoff" in words and system == TRIAGE:
        return [_call("transfer_to_helper", {})]
    if "choose" in words:
        return [_call("ask_user", {"question": "Which colour?", "choices": ["red", "blue"]})]
    if "free" in words:
        return [_call("ask_user", {"question": "What is the deadline?"})]
    if "hang" in words:  # a piece of text streamed, then nothing more
        return ModelStep.stream(_hang)
    if "inspect" in words:
        return [assistant_message(json.dumps(summary(system, items)))]
    if "think" in words:
        thought = ResponseReasoningItem(
            id="rs-1", type="reasoning", summary=[Summary(type="summary_text", text="pondering")]
        )
        return [thought, assistant_message("thought about it")]
    if "crash" in words:
        raise RuntimeError("scripted crash")
    return [assistant_message(f"echo: {text}")]


async def _hang(call: Any) -> AsyncIterator[Any]:
    """The SDK's own stream of a text answer, up to its first text delta; then it hangs."""
    step = ModelStep(output=[assistant_message("thinking about it")])
    for event in _stream_events_for_step(step, preserve_raw_usage=False):
        yield event
        if getattr(event, "type", "") == "response.output_text.delta":
            await anyio.sleep_forever()


class Scripted(ScriptedModel):
    """The SDK's scripted model, never out of steps: each step's responder queues the next."""

    def __init__(self) -> None:
        super().__init__([ModelStep.respond(self._step)])

    async def _step(self, call: Any) -> Any:
        self.enqueue(ModelStep.respond(self._step))
        items = (
            call.input
            if isinstance(call.input, list)
            else [{"role": "user", "content": call.input}]
        )
        return await respond(call.system_instructions, [dict(i) for i in items])


agent = sdk.Agent(
    name="oai-test",
    instructions="You are a test agent.",
    model=Scripted(),
    tools=[gate, block, quick, ask_user],
)
"""The suites' Agents SDK agent, as an author would write it."""

TRIAGE = "You hand work to the helper."
helper = sdk.Agent(
    name="helper", instructions="You are the helper.", model=Scripted(), tools=[quick, gate]
)
triage = sdk.Agent(name="triage", instructions=TRIAGE, model=Scripted(), handoffs=[helper])
"""F7: an agent that hands off (``handoff``) to another; the next prompts go to that one."""

not_an_agent = object()
"""F8: an object nothing can serve."""
