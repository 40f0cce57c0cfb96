"""A fleet on Ray that outlives this script: ``python fleet.py launch`` starts three
executions of :func:`inbox` and exits; ``python fleet.py status`` (any later run, any
machine of the cluster) lists them and posts to each; ``python fleet.py end`` ends them.

Start the cluster first, with a token (see docs/ray.md, "What listens where")::

    ray get-auth-token --generate >/dev/null
    RAY_AUTH_MODE=token ray start --head --node-ip-address 127.0.0.1 --num-cpus 2 \\
        --include-dashboard false
    RAY_AUTH_MODE=token RAY_ENABLE_UV_RUN_RUNTIME_ENV=0 python fleet.py launch

and stop it with ``ray stop`` when you are done.
"""

from __future__ import annotations

import sys

from agent_channel import (
    ChatMessage,
    ChatMessageUser,
    MessageAppended,
    UserMessage,
    agent_channel,
)


async def inbox(greeting: str = "ready") -> int:
    """A body: an async callable run inside its own channel (``agent_channel()``).

    It shares its conversation (what ``messages`` and the operators read), publishes what
    it appends, and takes the operators' messages at its boundary (``receive``). It returns
    when one says ``stop``; its return value is what ``ref.result()`` gives.
    """
    ch = agent_channel()
    messages: list[ChatMessage] = [ChatMessageUser(content=greeting)]
    ch.share(messages)
    while True:
        for item in await ch.receive():
            if not isinstance(item, UserMessage):
                continue
            if item.text == "stop":
                return len(messages)
            messages.append(ChatMessageUser(content=item.text))
            ch.publish(MessageAppended(message=messages[-1], index=len(messages) - 1))


def main(verb: str) -> None:
    import agent_channel_ray as acr

    acr.connect()  # the cluster `ray start` began on this machine
    if verb == "launch":  # "fleet:inbox" is imported on the worker (this script's folder)
        for i in range(3):
            ref = acr.launch("fleet:inbox", f"agent {i} ready", title=f"fleet {i}")
            print("launched", ref.execution_id)
        return  # this driver exits; the executions keep running
    running = [r for r in acr.executions() if r.status == "running"]
    for record in running:
        ref = acr.ref_for(record.execution_id)
        if verb == "end":
            ref.end()  # its actor is freed
            print("ended", record.execution_id)
        else:
            ref.post(UserMessage("still there?"))
            print(record.execution_id, record.title, [m.text for m in ref.messages()])


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "status")
