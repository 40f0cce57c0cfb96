"""``AdapterLoop``: the loop every framework adapter runs, driven by a toy framework whose
history is a list of strings and whose every prompt calls a tool that waits."""

from __future__ import annotations

import anyio
import pytest
from agent_channel import AgentChannel, UserMessage, open_channel
from agent_channel.lowlevel import CANCELLED_TEXT, RESTARTED_TEXT, AdapterLoop
from agent_channel.testing import MemoryStore

pytestmark = pytest.mark.anyio


class Toy(AdapterLoop[str]):
    """Each prompt records ``user:TEXT`` and ``call:N``; the call's tool waits until the
    prompt's text is ``quick``; its result is ``result:N:TEXT``."""

    state_key = "toy"

    def __init__(self, ch: AgentChannel) -> None:
        super().__init__(ch)
        self.calling = anyio.Event()

    async def prompt(self, resume: bool) -> None:
        texts = [u.text for u in self.users]
        self.users.clear()
        self.history += [f"user:{t}" for t in texts]
        n = len(self.history)
        self.history.append(f"call:{n}")
        self.checkpoint()
        self.calling.set()
        if texts[-1:] != ["quick"]:
            await anyio.sleep_forever()
        self.history.append(f"result:{n}:done")
        self.output = self.history[-1]

    def settle(self) -> None:
        self.calling = anyio.Event()

    def repair_history(self, text: str) -> set[str]:
        open_calls = [h for h in self.history if h.startswith("call:")]
        answered = {h.split(":")[1] for h in self.history if h.startswith("result:")}
        fixed = {c.split(":")[1] for c in open_calls} - answered
        self.history += [f"result:{n}:{text}" for n in sorted(fixed)]
        return fixed

    def has_unanswered(self) -> bool:
        calls = {h.split(":")[1] for h in self.history if h.startswith("call:")}
        return bool(calls - {h.split(":")[1] for h in self.history if h.startswith("result:")})

    def resumes(self) -> bool:
        return False

    def dump(self, history: list[str]) -> object:
        return list(history)

    def load(self, data: object) -> list[str]:
        assert isinstance(data, list)
        return [str(h) for h in data]  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]


async def test_an_interrupt_repairs_the_call_and_the_redirect_runs_the_next_prompt() -> None:
    async with open_channel() as ch:
        ref = ch.ref()
        toy = Toy(ch)
        ref.post(UserMessage("slow"))
        async with anyio.create_task_group() as tg:

            async def run() -> None:
                toy.output = await toy.run()

            tg.start_soon(run)
            await toy.calling.wait()
            ref.interrupt()
            ref.post(UserMessage("quick"))  # the redirect
        assert toy.history == [
            "user:slow",
            "call:1",
            f"result:1:{CANCELLED_TEXT['user_cancel']}",
            "user:quick",
            "call:4",
            "result:4:done",
        ]
        assert ch.stop_reason == "end_turn"
        assert [m.text for m in ref.messages()] == ["slow", "quick"]


async def test_a_restart_repairs_the_call_in_flight_and_parks_for_an_operator() -> None:
    store = MemoryStore()
    with anyio.CancelScope() as crash:  # around the channel: it is left running, as by a kill
        async with open_channel(journal=store.journal("e1")) as ch:
            toy = Toy(ch)
            ch.ref().post(UserMessage("slow"))

            async def crash_when_calling() -> None:
                await toy.calling.wait()
                crash.cancel()

            async with anyio.create_task_group() as tg:
                tg.start_soon(crash_when_calling)
                await toy.run()
    restarted = store.reopen()
    async with open_channel(journal=restarted.journal("e1")) as ch:
        ref = ch.ref()
        ref.mark_live()
        toy = Toy(ch)
        assert not toy.restore()  # parks: nothing to resume
        assert toy.history == ["user:slow", "call:1", f"result:1:{RESTARTED_TEXT}"]
