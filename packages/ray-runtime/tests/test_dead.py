"""A ref whose actor died behaves as a finished local ref (N4): no Ray error reaches it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import agent_channel_ray as acr
import anyio
import cluster_bodies as bodies
import pytest
import ray
from agent_channel import ChannelClosed, ExecutionEvent, UnknownChild, UserMessage, open_channel

CALLS: dict[str, Callable[[Any], Any]] = {
    "closed": lambda ref: ref.closed,
    "turn_state": lambda ref: ref.turn_state,
    "post": lambda ref: ref.post(UserMessage("late")),
    "interrupt": lambda ref: ref.interrupt(),
    "withdraw": lambda ref: ref.withdraw("nope"),
    "cancel_region": lambda ref: ref.cancel_region("k"),
    "messages": lambda ref: ref.messages(),
    "children.list": lambda ref: ref.children.list(),
    "children.info": lambda ref: ref.children.info("c"),
    "children.result": lambda ref: ref.children.result("c"),
    "children.messages": lambda ref: ref.children.messages("c"),
    "children.steer": lambda ref: ref.children.steer("c", "x"),
    "children.stop": lambda ref: ref.children.stop("c"),
    "mark_live": lambda ref: callable(ref.mark_live()),
    "snapshot": lambda ref: ref.watch(_ignore)[0].closed,
}


def _ignore(event: ExecutionEvent) -> None:
    return None


def _outcomes(ref: Any) -> dict[str, str]:
    """Each call's value, or the type of what it raised."""
    seen: dict[str, str] = {}
    for name, call in CALLS.items():
        try:
            seen[name] = repr(call(ref))
        except Exception as exc:
            seen[name] = f"raises {type(exc).__name__}"
    return seen


async def _finished_local() -> dict[str, str]:
    async with open_channel() as ch:
        ref = ch.ref()
    return _outcomes(ref)


def test_n4_every_method_of_a_dead_actors_ref_is_a_finished_local_refs() -> None:
    ref = acr.launch(bodies.inbox, title="to kill")  # an actor of its own
    ref.post(UserMessage("one"))
    ray.kill(ref.host)
    expected = anyio.run(_finished_local)
    for dead in (ref, acr.ref_for(ref.execution_id)):  # the launcher's ref and a looked-up one
        assert _outcomes(dead) == expected
    with pytest.raises(ChannelClosed, match="its actor died"):
        ref.result(timeout=60)


@pytest.mark.anyio
async def test_n4_routing_on_a_dead_actors_ref_is_a_no_op_release() -> None:
    ref = acr.launch(bodies.inbox)
    ray.kill(ref.host)

    async def approve(request: object) -> bool:
        return True

    release = ref.route_approvals(approve)
    release()
    release = ref.route_questions(approve)  # type: ignore[arg-type]
    release()
    with pytest.raises(UnknownChild):
        ref.children.info("c")
