"""support.py: an OpenAI Agents SDK agent written as any other; agent-channel serves it as it is.

agent-channel-acp serve --agent support:agent --input "where is order 42"
"""

import anyio
from agents import Agent, function_tool, set_tracing_disabled
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

set_tracing_disabled(True)  # the stand-in model below needs no key: nothing leaves the machine
lookup_seconds = 2.0


@function_tool
async def order_status(order: str) -> str:
    """The status of an order (slow: long enough to stop it)."""
    await anyio.sleep(lookup_seconds)
    return f"order {order} has shipped"


def stand_in(call):
    """A scripted model (no key): look the order up, then answer from what the tool said."""
    model.enqueue(ModelStep.respond(stand_in))  # never out of steps
    last = call.input[-1]
    if last.get("type") == "function_call_output":
        return [assistant_message(f"Your {last['output']}.")]
    order = str(last["content"]).split()[-1]
    return [function_call("order_status", {"order": order}, call_id=f"call-{len(call.input)}")]


model = ScriptedModel([ModelStep.respond(stand_in)])
agent = Agent(name="support", model=model, tools=[order_status])
