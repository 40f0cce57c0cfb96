"""Children (K1-K13, docs/children.md): one test or more per rule, on asyncio and trio.

The hammers (K2, K3, K7) are in test_children_hammers.py.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable

import anyio
import anyio.lowlevel
import pytest
from agent_channel import (
    AgentChannel,
    AgentInterrupted,
    Announce,
    Cancel,
    ChannelItem,
    ChatMessageUser,
    ChildEnded,
    ChildLimits,
    ChildStarted,
    ChildSteered,
    ChildToolCall,
    ChildUpdated,
    Conversation,
    ExecutionEvent,
    SpawnRefused,
    Steer,
    ToolCall,
    ToolCallFinished,
    UnknownChild,
    Usage,
    UserMessage,
    agent_channel,
    agent_supervisor,
    fold,
    open_channel,
    open_supervisor,
    parse_item,
    wait_for_message,
)

pytestmark = pytest.mark.anyio


async def until(condition: Callable[[], bool]) -> None:
    """Poll ``condition`` at every loop step, with a deadline (no sleeps as synchronisation)."""
    with anyio.fail_after(10):
        while not condition():
            await anyio.lowlevel.checkpoint()


async def forever(_: str) -> str:
    await anyio.sleep_forever()
    raise AssertionError("unreachable")


def announces(items: list[ChannelItem]) -> list[Announce]:
    return [i for i in items if isinstance(i, Announce)]


# -- items ------------------------------------------------------------------------------


def test_steer_and_announce_are_items_that_round_trip_and_fold_with_their_source() -> None:
    steer = Steer("look at the tests first", source="operator")
    announce = Announce(
        child_id="c1", name="researcher", status="completed", result="three sources"
    )
    assert parse_item(steer.model_dump(mode="json")) == steer
    assert parse_item(announce.model_dump(mode="json")) == announce
    folded = fold([UserMessage("hi"), steer, Steer("and be brief", source="operator"), announce])
    assert [(m.source, m.text) for m in folded.messages] == [
        ("operator", "hi\n\nlook at the tests first\n\nand be brief"),
        ("child", "Child researcher (id c1) completed.\n\nResult:\nthree sources"),
    ]
    assert folded.other == []


def test_an_announce_names_how_the_child_ended() -> None:
    def text(**kw: object) -> str:
        return Announce(child_id="c", name="n", **kw).text  # type: ignore[arg-type]

    assert (
        text(status="failed", reason="ValueError: no") == "Child n (id c) failed: ValueError: no."
    )
    assert text(status="killed", reason="off topic") == "Child n (id c) was killed: off topic."
    assert text(status="limit", limit="turns", reason="3 turn(s)") == (
        "Child n (id c) was stopped by its turns limit: 3 turn(s)."
    )
    assert "its parent's execution ended" in text(status="parent_ended")
    assert "[5 more characters not shown" in text(status="completed", result="x", omitted=5)


# -- K1 spawn ---------------------------------------------------------------------------


async def test_k1_spawn_returns_at_once_and_the_child_runs_in_its_own_task_on_its_own_channel() -> (
    None
):
    async with open_channel() as parent, open_supervisor() as sup:
        seen: dict[str, object] = {}

        async def body(task: str) -> str:
            seen["channel"] = agent_channel()
            seen["supervisor"] = agent_supervisor()
            seen["task"] = anyio.get_current_task().id
            return f"done: {task}"

        child_id = sup.spawn(body, "count the files", name="counter")
        assert seen == {}  # spawn returned before the child ran
        info = await sup.wait(child_id)
        assert (info.end, info.result, info.name) == (
            "completed",
            "done: count the files",
            "counter",
        )
        assert isinstance(seen["channel"], AgentChannel) and seen["channel"] is not parent
        assert seen["supervisor"] is not sup and seen["supervisor"] is not None
        assert seen["task"] != anyio.get_current_task().id
        assert agent_supervisor() is sup and agent_channel() is parent


async def test_k1_a_body_that_raises_fails_the_child_not_the_parent() -> None:
    async with open_channel() as parent, open_supervisor() as sup:

        async def body(_: str) -> str:
            raise ValueError("no such file")

        info = await sup.wait(sup.spawn(body))
        assert (info.end, info.reason) == ("failed", "ValueError: no such file")
        [announce] = announces(parent.drain())
        assert announce.text == f"Child child-1 (id {info.id}) failed: ValueError: no such file."


async def test_k1_the_parents_own_error_leaves_open_supervisor_as_it_is() -> None:
    async with open_channel():
        with pytest.raises(AgentInterrupted):
            async with open_supervisor() as sup:
                sup.spawn(forever)
                raise AgentInterrupted(Cancel())


async def test_k1_open_supervisor_needs_an_execution_and_only_one_per_execution() -> None:
    with pytest.raises(RuntimeError, match="inside open_channel"):
        async with open_supervisor():
            pass
    async with open_channel(), open_supervisor():
        with pytest.raises(RuntimeError, match="already has a supervisor"):
            async with open_supervisor():
                pass


# -- K2 ending the parent ---------------------------------------------------------------


async def test_k2_ending_the_parent_ends_every_child_each_announced_parent_ended() -> None:
    async with open_channel() as parent:
        events: list[ExecutionEvent] = []
        parent.ref().subscribe(events.append)
        started: list[str] = []
        finished: list[str] = []

        async def body(name: str) -> str:
            started.append(name)
            try:
                await anyio.sleep_forever()
            finally:
                finished.append(name)
            return ""

        with anyio.fail_after(10):  # a supervisor that waited for its children would hang
            async with open_supervisor() as sup:
                ids = [sup.spawn(body, f"c{i}") for i in range(3)]
                await until(lambda: len(started) == 3)
        assert sorted(finished) == ["c0", "c1", "c2"]  # each child's task ran to its end
        # in the order they ended: trio runs the cancelled tasks in a random order
        assert sorted((a.child_id, a.status) for a in announces(parent.drain())) == sorted(
            (i, "parent_ended") for i in ids
        )
        ended = [e.child for e in events if isinstance(e, ChildEnded)]
        assert sorted((c.id, c.end) for c in ended) == sorted((i, "parent_ended") for i in ids)
        with pytest.raises(SpawnRefused, match="ending"):
            sup.spawn(body)


# -- K3 steer ---------------------------------------------------------------------------


async def test_k3_a_steer_is_delivered_with_the_sequence_of_the_drain_that_took_it() -> None:
    async with open_channel(), open_supervisor() as sup:
        drains: list[tuple[int, list[str]]] = []
        go = anyio.Event()

        async def body(_: str) -> str:
            ch = agent_channel()
            numbers: list[int] = []
            snapshot, _unsubscribe = ch.ref().watch(lambda e: numbers.append(len(numbers)))
            base = snapshot.seq
            await go.wait()
            items = ch.drain()
            drains.append((base + len(numbers) - 1, [i.id for i in items]))
            return fold(items).messages[0].text

        child_id = sup.spawn(body)
        steering = sup.steer(child_id, "focus on the tests")  # before its channel is open
        second = sup.steer(child_id, "and the docs")
        assert steering.outcome == "pending"
        go.set()
        await steering.wait()
        await second.wait()
        info = await sup.wait(child_id)
        assert info.result == "focus on the tests\n\nand the docs"  # in order, one message
        [(seq, ids)] = drains
        assert (steering.outcome, steering.seq) == ("delivered", seq)
        assert (second.outcome, second.seq) == ("delivered", seq)
        assert ids == [steering.id, second.id]


async def test_k3_a_steer_the_child_never_drains_is_undelivered_once_it_ends() -> None:
    async with open_channel() as parent, open_supervisor() as sup:
        events: list[ExecutionEvent] = []
        parent.ref().subscribe(events.append)
        release = anyio.Event()

        async def body(_: str) -> str:
            await release.wait()
            return "never looked"

        child_id = sup.spawn(body)
        await anyio.lowlevel.checkpoint()
        late = sup.steer(child_id, "too late")
        release.set()
        await sup.wait(child_id)
        assert (late.outcome, late.reason) == ("undelivered", "the child ended before reading it")
        after = sup.steer(child_id, "after the end")  # known at once
        assert after.outcome == "undelivered"
        outcomes = [(e.steer_id, e.outcome) for e in events if isinstance(e, ChildSteered)]
        assert outcomes == [(late.id, "undelivered"), (after.id, "undelivered")]
        with pytest.raises(UnknownChild, match="no child with id 'nope'"):
            sup.steer("nope", "hello")


async def test_k3_a_steer_folds_in_the_child_as_a_user_message_marked_from_the_parent() -> None:
    async with open_channel(), open_supervisor() as sup:
        go = anyio.Event()

        async def body(_: str) -> str:
            ch = agent_channel()
            conversation = Conversation(ch, [ChatMessageUser(content="task")])
            await go.wait()
            conversation.extend(fold(ch.drain()).messages)
            return ""

        child_id = sup.spawn(body)
        sup.steer(child_id, "switch to plan B")
        go.set()
        await sup.wait(child_id)
        last = sup.messages(child_id, tail=1)[0]
        assert isinstance(last, ChatMessageUser)
        assert (last.source, last.text) == ("parent", "switch to plan B")


# -- K4 kill ----------------------------------------------------------------------------


async def test_k4_kill_interrupts_the_child_and_ends_it_killed_with_the_reason() -> None:
    async with open_channel() as parent, open_supervisor() as sup:
        child_events: list[ExecutionEvent] = []
        in_tool = anyio.Event()

        async def body(_: str) -> str:
            ch = agent_channel()
            ch.ref().subscribe(child_events.append)
            conversation = Conversation(ch)
            call = ToolCall(id="t1", name="crawl")
            with ch.scope(), conversation.tool_call(call):
                in_tool.set()
                await anyio.sleep_forever()
            return "not reached"

        child_id = sup.spawn(body)
        await in_tool.wait()
        assert sup.kill(child_id, "off topic") is True
        assert sup.kill(child_id) is False  # already being ended
        info = await sup.wait(child_id)
        assert (info.end, info.reason, info.result) == ("killed", "off topic", "")
        finished = [e for e in child_events if isinstance(e, ToolCallFinished)]
        assert [(e.tool_call_id, e.status) for e in finished] == [("t1", "cancelled")]
        [announce] = announces(parent.drain())
        assert announce.text == f"Child child-1 (id {child_id}) was killed: off topic."
        assert sup.kill(child_id) is False


# -- K5 announce ------------------------------------------------------------------------


async def test_k5_a_parent_parked_for_input_wakes_on_an_announce() -> None:
    async with open_channel() as parent, open_supervisor() as sup:
        go = anyio.Event()

        async def body(_: str) -> str:
            await go.wait()
            return "42 files"

        child_id = sup.spawn(body, name="counter")

        async def finish_later() -> None:
            await until(lambda: parent._waiter is not None)  # the parent is parked
            go.set()

        folded = fold([])
        async with anyio.create_task_group() as tg:
            tg.start_soon(finish_later)
            with anyio.fail_after(10):
                folded = await wait_for_message(parent)
        assert [(m.source, m.text) for m in folded.messages] == [
            ("child", f"Child counter (id {child_id}) completed.\n\nResult:\n42 files")
        ]


async def test_k5_an_announce_made_mid_turn_folds_at_the_next_boundary() -> None:
    async with open_channel() as parent, open_supervisor() as sup:
        parent.ref()  # scopes are real: an interrupt could stop them
        go = anyio.Event()

        async def body(_: str) -> str:
            await go.wait()
            return "done"

        child_id = sup.spawn(body)
        conversation: list[str] = []
        with parent.scope():  # the turn goes on: an announce does not stop it
            go.set()
            await sup.wait(child_id)
            conversation.append("the turn's own answer")
        conversation.extend(m.text for m in fold(parent.drain()).messages)
        assert conversation == [
            "the turn's own answer",
            f"Child child-1 (id {child_id}) completed.\n\nResult:\ndone",
        ]


async def test_k5_an_announce_is_queued_even_past_the_channels_bound() -> None:
    async with open_channel(max_queued=2) as parent, open_supervisor() as sup:
        parent.ref().post(UserMessage("a"))
        parent.ref().post(UserMessage("b"))  # full: a producer's next post is refused

        async def body(_: str) -> str:
            return "x" * 5000

        child_id = sup.spawn(body)
        await sup.wait(child_id)
        [announce] = announces(parent.drain())
        assert (announce.result, announce.omitted) == ("x" * 2000, 3000)  # bounded
        assert sup.result(child_id) == "x" * 5000  # the rest on demand


# -- K6 registry ------------------------------------------------------------------------


async def test_k6_an_ended_child_keeps_its_row_and_frees_its_execution_without_the_gc() -> None:
    """The registry keeps up to ``max_total`` rows: an ended child's channel, supervisor and
    scope must go by reference counting alone (no cycle left for the GC to find)."""
    channels: list[weakref.ref[AgentChannel]] = []

    async def body(_: str) -> str:
        ch = agent_channel()
        channels.append(weakref.ref(ch))
        ch.drain()
        with ch.scope():
            await anyio.lowlevel.checkpoint()
        return "done"

    gc.disable()
    try:
        async with open_channel(), open_supervisor() as sup:
            for _ in range(3):
                await sup.wait(sup.spawn(body))
            for _ in range(3):  # the tasks finish and their task group lets them go
                await anyio.lowlevel.checkpoint()
            assert [c() for c in channels] == [None, None, None]
            assert [r.result for r in sup.children()] == ["done"] * 3
    finally:
        gc.enable()


async def test_k6_the_registry_lists_status_turns_activity_and_reads_a_childs_tail() -> None:
    async with open_channel(), open_supervisor() as sup:
        parked = anyio.Event()

        async def worker(_: str) -> str:
            ch = agent_channel()
            ch.ref()
            conversation = Conversation(ch, [ChatMessageUser(content="go")])
            for turn in range(3):
                with ch.scope():
                    conversation.append(ChatMessageUser(content=f"turn {turn}"))
            parked.set()
            await wait_for_message(ch)  # waits for input: status "waiting"
            return "ok"

        async def quick(_: str) -> str:
            return "quick"

        w = sup.spawn(worker, name="worker")
        q = sup.spawn(quick, name="quick")
        await sup.wait(q)
        await parked.wait()
        await until(lambda: sup.info(w).status == "waiting")
        rows = {r.name: r for r in sup.children()}
        assert (rows["worker"].status, rows["worker"].turns) == ("waiting", 3)
        assert (rows["quick"].status, rows["quick"].end) == ("ended", "completed")
        assert rows["worker"].last_activity >= rows["worker"].started > 0
        assert [m.text for m in sup.messages(w, tail=2)] == ["turn 1", "turn 2"]
        sup.steer(w, "carry on")
        await until(lambda: sup.info(w).status != "waiting")
        info = await sup.wait(w)
        assert (info.status, info.end) == ("ended", "completed")
        assert [m.text for m in sup.messages(w)][-1] == "turn 2"  # kept after the end


# -- K7 caps ----------------------------------------------------------------------------


async def test_k7_past_a_cap_spawn_fails_at_once_with_words_a_model_can_act_on() -> None:
    async with open_channel(), open_supervisor(max_running=2, max_total=3) as sup:
        a, b = sup.spawn(forever), sup.spawn(forever)
        with pytest.raises(SpawnRefused, match="2 children are already running, the limit"):
            sup.spawn(forever)
        sup.kill(a)
        await sup.wait(a)
        sup.spawn(forever)  # a slot came free
        sup.kill(b)
        await sup.wait(b)
        with pytest.raises(SpawnRefused, match="already spawned 3 children, its limit in all"):
            sup.spawn(forever)
    with pytest.raises(ValueError, match="max_running"):
        async with open_channel(), open_supervisor(max_running=0):
            pass


# -- K8 limits --------------------------------------------------------------------------


async def test_k8_a_child_past_its_turn_limit_ends_with_status_limit_naming_it() -> None:
    async with open_channel() as parent, open_supervisor() as sup:
        turns_run: list[int] = []

        async def body(_: str) -> str:
            ch = agent_channel()
            for turn in range(10):
                with ch.scope():
                    turns_run.append(turn)
                    await anyio.lowlevel.checkpoint()
            return "ran all ten"

        child_id = sup.spawn(body, limits=ChildLimits(turns=3))
        info = await sup.wait(child_id)
        assert (info.end, info.limit, info.reason) == ("limit", "turns", "3 turn(s)")
        assert turns_run == [0, 1, 2, 3]  # the fourth was stopped at its first await
        [announce] = announces(parent.drain())
        assert "was stopped by its turns limit: 3 turn(s)." in announce.text


async def test_k8_tokens_are_summed_from_the_childs_model_calls_and_limited() -> None:
    async with open_channel(), open_supervisor() as sup:

        async def body(_: str) -> str:
            conversation = Conversation(agent_channel())
            for _call in range(5):
                with conversation.model_call("m") as call:
                    call.finish(usage=Usage(input_tokens=60, output_tokens=40, total_tokens=100))
                await anyio.lowlevel.checkpoint()
            return "five calls"

        child_id = sup.spawn(body, limits=ChildLimits(tokens=250))
        info = await sup.wait(child_id)
        assert (info.end, info.limit, info.reason) == ("limit", "tokens", "250 tokens (300 used)")
        assert info.usage.total_tokens == 300


async def test_k8_wall_time_ends_a_child_with_status_limit() -> None:
    async with open_channel(), open_supervisor() as sup:
        child_id = sup.spawn(forever, limits=ChildLimits(seconds=0.01))
        info = await sup.wait(child_id)
        assert (info.end, info.limit, info.reason) == ("limit", "time", "0.01 s")
    with pytest.raises(ValueError, match="turns must be an int"):
        ChildLimits(turns=0)


# -- K11 / K12 operators ----------------------------------------------------------------


async def test_k11_child_events_reach_the_parents_subscribers_for_the_whole_tree() -> None:
    async with open_channel() as parent:
        events: list[ExecutionEvent] = []
        parent.ref().subscribe(events.append)
        async with open_supervisor() as sup:

            async def grandchild(_: str) -> str:
                with agent_channel().scope():
                    await anyio.lowlevel.checkpoint()
                return "leaf"

            async def child(_: str) -> str:
                inner = agent_supervisor()
                assert inner is not None
                return (await inner.wait(inner.spawn(grandchild, name="leaf"))).result or ""

            child_id = sup.spawn(child, name="middle")
            sup.steer(child_id, "hurry")
            await sup.wait(child_id)
        started = [e.child.name for e in events if isinstance(e, ChildStarted)]
        ended = [
            (e.child.name, e.child.depth, e.child.parent_id)
            for e in events
            if isinstance(e, ChildEnded)
        ]
        assert started == ["middle", "leaf"]
        assert ended == [("leaf", 2, child_id), ("middle", 1, None)]
        assert any(isinstance(e, ChildUpdated) and e.child.name == "leaf" for e in events)
        assert [e.outcome for e in events if isinstance(e, ChildSteered)] == ["undelivered"]
        assert not [e for e in events if isinstance(e, ChildStarted) and e.child.depth > 2]


async def test_k12_an_operator_stops_and_steers_a_child_from_another_thread() -> None:
    async with open_channel() as parent:
        ref = parent.ref()
        assert ref.children.list() == ()  # no supervisor yet: no children
        async with open_supervisor() as sup:
            ready = anyio.Event()

            async def reader(_: str) -> str:
                ch = agent_channel()
                while True:
                    folded = await wait_for_message(ch)
                    if folded.messages:
                        return folded.messages[0].text

            async def waiter(_: str) -> str:
                ready.set()
                await anyio.sleep_forever()
                return ""

            r = sup.spawn(reader, name="reader")
            w = sup.spawn(waiter, name="waiter")
            await ready.wait()
            await until(lambda: sup.info(r).status == "waiting")

            def operator() -> tuple[bool, str, tuple[str, ...]]:
                stopped = ref.children.stop(w)
                steering = ref.children.steer(r, "read the changelog")
                return stopped, steering.id, tuple(i.name for i in ref.children.list())

            stopped, _steer_id, names = await anyio.to_thread.run_sync(operator)
            assert stopped and names == ("reader", "waiter")
            assert (await sup.wait(w)).reason == "stopped by the operator"
            assert (await sup.wait(r)).result == "read the changelog"
            items = parent.drain()
            assert [i.text for i in items if isinstance(i, UserMessage)] == [
                f"The operator stopped child waiter (id {w}).",
                f"The operator told child reader (id {r}): read the changelog",
            ]
            assert all(i.source == "supervisor" for i in items if isinstance(i, UserMessage))
            assert {(a.child_id, a.status) for a in announces(items)} == {
                (w, "killed"),
                (r, "completed"),
            }
            with pytest.raises(UnknownChild):
                ref.children.stop("nope")
            assert ref.children.stop(w) is False  # ended: nothing to stop, and no note
            assert parent.drain() == []


# -- K13 depth --------------------------------------------------------------------------


async def test_k13_children_nest_to_the_depth_limit_and_no_further() -> None:
    async with open_channel() as parent, open_supervisor() as sup:
        refusals: list[str] = []
        depths: list[int] = []

        async def level(task: str) -> str:
            inner = agent_supervisor()
            assert inner is not None
            depths.append(inner.depth)
            try:
                child_id = inner.spawn(level, "deeper")
            except SpawnRefused as e:
                refusals.append(str(e))
                return "bottom"
            return (await inner.wait(child_id)).result or ""

        top = sup.spawn(level, "start")
        assert (await sup.wait(top)).result == "bottom"
        assert depths == [1, 2]
        assert refusals == [
            "depth limit: this execution is 2 level(s) below the top and children nest at "
            "most 2 deep; do this work here instead"
        ]
        tree = parent.ref().children.list()
        assert [(c.depth, c.end) for c in tree] == [(1, "completed"), (2, "completed")]


@pytest.mark.parametrize("how", ["killed", "completed", "failed"])
async def test_k13_a_childs_own_children_end_before_it_however_it_ends(how: str) -> None:
    """A child's supervisor opens no task group of its own (its children start in the top
    level's), yet as a task group would, it ends its children and waits for them before the
    child ends: their ChildEnded come first, and its row carries their final tree."""
    events: list[ExecutionEvent] = []
    started = anyio.Event()

    async def grand(_: str) -> None:
        with agent_channel().scope():
            started.set()
            await anyio.sleep_forever()

    async def child(_: str) -> str:
        inner = agent_supervisor()
        assert inner is not None
        inner.spawn(grand, name="g1")
        inner.spawn(grand, name="g2")
        await started.wait()
        if how == "failed":
            raise ValueError("boom")
        if how == "killed":
            await anyio.sleep_forever()
        return "done"

    async with open_channel() as parent, open_supervisor() as sup:
        parent.ref().subscribe(events.append)
        c = sup.spawn(child, name="c")
        await started.wait()
        if how == "killed":
            assert sup.kill(c)
        row = await sup.wait(c)
        assert row.end == how
        ends = [(e.child.name, e.child.end) for e in events if isinstance(e, ChildEnded)]
        assert sorted(ends[:2]) == [("g1", "parent_ended"), ("g2", "parent_ended")]
        assert ends[2:] == [("c", how)]
        tree = parent.ref().children.list()
        assert [(r.name, r.status) for r in tree] == [
            ("c", "ended"),
            ("g1", "ended"),
            ("g2", "ended"),
        ]


# -- K9 approvals bind children ---------------------------------------------------------


async def test_k9_a_childs_tool_call_asks_its_top_levels_approver_naming_the_child() -> None:
    asked: list[ToolCall] = []
    verdicts = {"read": True, "rm": False}

    async def operator(call: ToolCall) -> bool:
        asked.append(call)
        return verdicts[call.name]

    async def allow_all(call: ToolCall) -> bool:
        return True

    async def child(task: str) -> str:
        ch = agent_channel()
        ch.approver = allow_all  # the child's own code cannot widen what its parent allows
        approver = ch.approver
        assert approver is not None
        out = [await approver(ToolCall(id="call_1", name=name)) for name in ("read", "rm")]
        inner = agent_supervisor()
        assert inner is not None
        grandchild = inner.spawn(grand, "deeper", name="digger")
        await inner.wait(grandchild)
        return f"{out} {inner.result(grandchild)}"

    async def grand(task: str) -> str:
        approver = agent_channel().approver
        assert approver is not None
        return str(await approver(ToolCall(id="call_1", name="read")))

    async with open_channel(approver=operator), open_supervisor() as sup:
        c = sup.spawn(child, "work", name="worker")
        assert (await sup.wait(c)).result == "[True, False] True"
        worker = sup.info(c)
        digger = next(i for i in agent_channel().ref().children.list() if i.name == "digger")
    assert [(type(a).__name__, a.name) for a in asked] == [
        ("ChildToolCall", "read"),
        ("ChildToolCall", "rm"),
        ("ChildToolCall", "read"),
    ]
    first, _, deepest = (a for a in asked if isinstance(a, ChildToolCall))
    assert (first.child_id, first.child_name, first.call_id) == (worker.id, "worker", "call_1")
    assert first.id == f"{worker.id}/call_1"  # unique beside the parent's own call_1
    assert (deepest.child_id, deepest.child_name) == (digger.id, "digger")


async def test_k9_an_approver_a_producer_routes_later_binds_running_children() -> None:
    gate = anyio.Event()
    asked: list[str] = []

    async def operator(call: ToolCall) -> bool:
        asked.append(call.name)
        return False

    async def child(task: str) -> str:
        await gate.wait()
        approver = agent_channel().approver
        assert approver is not None
        return str(await approver(ToolCall(id="call_1", name="write")))

    async with open_channel() as parent, open_supervisor() as sup:
        free = sup.spawn(child, "before")
        release = parent.ref().route_approvals(operator)
        gate.set()
        assert (await sup.wait(free)).result == "False"
        release()
        again = sup.spawn(child, "after")
        assert (await sup.wait(again)).result == "True"  # no approver anywhere: none asked
    assert asked == ["write"]


async def test_k5_a_consumer_that_read_a_childs_end_another_way_takes_its_announce_back() -> None:
    async def quick(task: str) -> str:
        return f"done {task}"

    async with open_channel() as parent, open_supervisor() as sup:
        c = sup.spawn(quick, "x")
        await sup.wait(c)
        assert sup.withdraw_announce(c) is True  # still queued: taken back
        assert sup.withdraw_announce(c) is False  # once
        assert announces(parent.drain()) == []
        d = sup.spawn(quick, "y")
        await sup.wait(d)
        assert [a.child_id for a in announces(parent.drain())] == [d]
        assert sup.withdraw_announce(d) is False  # drained already: nothing to take back
