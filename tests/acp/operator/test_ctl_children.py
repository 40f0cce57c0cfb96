"""The verbs on children (K11, K12): ``ls`` shows them under their execution, ``messages
--child`` reads one, ``send --child`` steers one and ``cancel --child`` stops one, all as
subprocesses against ``serve`` running the suite's orchestrator (``orchestrator_agent``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from serving import ctl, ctl_json, execution, messages, one_line_failure, serving, wait_for

AGENT = ("--agent", "agents:orchestrator_agent", "--input", "spawn alpha beta gamma")


@pytest.fixture
def rt(tmp_path: Path) -> Path:
    return tmp_path / "rt"


def children(rt: Path, target: str) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in execution(rt, target).get("children", [])}


def test_k11_ls_shows_the_children_indented_under_their_execution(rt: Path) -> None:
    with serving(rt, *AGENT) as served:
        (target,) = served.ids()
        wait_for(
            lambda: [c["status"] for c in children(rt, target).values()] == ["waiting"] * 3,
            "three children waiting",
        )
        (server,) = ctl_json(rt, "ls")["servers"]
        (listed,) = server["executions"]
        assert [c["name"] for c in listed["children"]] == ["alpha", "beta", "gamma"]
        lines = ctl(rt, "ls").stdout.splitlines()
        at = next(i for i, line in enumerate(lines) if line.startswith(f"  {target}"))
        rows = lines[at + 1 : at + 4]
        for row, c in zip(rows, listed["children"], strict=True):
            assert row == f"    child {c['id']}  waiting  0 turns  {c['name']}"


def test_k12_cancel_child_stops_that_child_only_and_the_parent_sees_the_note(rt: Path) -> None:
    with serving(rt, *AGENT) as served:
        (target,) = served.ids()
        wait_for(lambda: len(children(rt, target)) == 3, "three children")
        ids = {name: c["id"] for name, c in children(rt, target).items()}

        run = ctl(rt, "cancel", target[:6], "--child", ids["beta"])
        assert run.returncode == 0, run.stderr
        assert run.stdout.strip() == f"stopped child {ids['beta']} of {target}"
        now = children(rt, target)
        assert now["beta"]["status"] == "ended" and now["beta"]["end"] == "killed"
        assert now["alpha"]["status"] != "ended" and now["gamma"]["status"] != "ended"
        note = f"The operator stopped child beta (id {ids['beta']})."
        wait_for(
            lambda: f"seen: {note}" in [m["text"] for m in messages(rt, target)],
            "the parent's next turn answering the note",
        )
        texts = [m["text"] for m in messages(rt, target, every=True)]
        assert texts.count(note) == 1 and texts.index(note) < texts.index(f"seen: {note}")
        assert execution(rt, target)["status"] != "finished"  # the parent goes on

        again = json.loads(ctl(rt, "cancel", target, "--child", ids["beta"], "--json").stdout)
        assert again["stopped"] is False and again["status"] == "ended"
        one_line_failure(ctl(rt, "cancel", target, "--child", "nope"), "has no child 'nope'")


def test_k12_send_child_steers_it_and_messages_child_reads_its_conversation(rt: Path) -> None:
    with serving(rt, *AGENT) as served:
        (target,) = served.ids()
        wait_for(
            lambda: children(rt, target).get("alpha", {}).get("status") == "waiting",
            "alpha waiting",
        )
        alpha = children(rt, target)["alpha"]["id"]
        run = ctl(rt, "send", target, "--child", alpha, "finish it")
        assert run.returncode == 0, run.stderr
        assert run.stdout.strip() == f"steered child {alpha} of {target}: it read the message"
        wait_for(lambda: children(rt, target)["alpha"]["end"] == "completed", "alpha done")
        read = ctl_json(rt, "messages", target, "--child", alpha)
        assert read["childId"] == alpha and read["status"] == "ended"
        said = [m["text"] for m in read["messages"]]
        assert said == ["research alpha", "finish it", "alpha: done"]
        assert [m.get("source") for m in read["messages"]][1] == "operator"
        text = ctl(rt, "messages", target, "--child", alpha).stdout.splitlines()
        assert text[0] == f"{target} child {alpha}  ended  3 messages"
        late = ctl(rt, "send", target, "--child", alpha, "again", "--json")
        assert late.returncode == 1 and json.loads(late.stdout)["outcome"] == "undelivered"
        assert "did not read it" in late.stderr
        listing = ctl(rt, "ls").stdout
        assert f"child {alpha}  ended (completed)  1 turns  alpha" in listing


def _unique_prefix(child: str, others: list[str]) -> str:
    """The shortest prefix of ``child`` that no other id starts with."""
    return next(child[:n] for n in range(1, 17) if not any(o.startswith(child[:n]) for o in others))


def test_k12_child_takes_a_unique_prefix_and_names_an_ambiguous_or_unknown_one(rt: Path) -> None:
    with serving(rt, *AGENT) as served:
        (target,) = served.ids()
        # 18 children (the three researchers, then 15 that end at once) have, by pigeonhole,
        # two ids with the same first digit: an ambiguous prefix, forced
        for batch in ("a b c d e", "f g h i j", "k l m n o"):
            assert ctl(rt, "send", target, f"ask {batch}").returncode == 0
        wait_for(
            lambda: sum(c["status"] == "ended" for c in children(rt, target).values()) == 15,
            "fifteen children ended",
        )
        ids = [c["id"] for c in children(rt, target).values()]
        alpha = children(rt, target)["alpha"]["id"]
        short = _unique_prefix(alpha, [i for i in ids if i != alpha])

        read = ctl_json(rt, "messages", target[:6], "--child", short)
        assert read["childId"] == alpha and read["messages"][0]["text"] == "research alpha"
        run = ctl(rt, "send", target, "--child", short, "finish it")
        assert run.returncode == 0, run.stderr
        assert run.stdout.strip() == f"steered child {alpha} of {target}: it read the message"
        beta = children(rt, target)["beta"]["id"]
        run = ctl(
            rt, "cancel", target, "--child", _unique_prefix(beta, [i for i in ids if i != beta])
        )
        assert run.stdout.strip() == f"stopped child {beta} of {target}", run.stderr

        digit = next(d for d in "0123456789abcdef" if sum(i.startswith(d) for i in ids) > 1)
        both = sorted(i for i in ids if i.startswith(digit))
        for verb in ("messages", "send", "cancel"):
            args = (verb, target, "--child", digit, *(("hi",) if verb == "send" else ()))
            one_line_failure(ctl(rt, *args), f"{digit!r} matches {len(both)} children", *both)
        one_line_failure(ctl(rt, "send", target, "--child", "nope", "hi"), "has no child 'nope'")


def test_k11_after_the_parent_ends_ls_shows_its_children_ended_and_their_reads_say_why(
    rt: Path,
) -> None:
    with serving(rt, *AGENT) as served:
        (target,) = served.ids()
        wait_for(lambda: len(children(rt, target)) == 3, "three children")
        alpha = children(rt, target)["alpha"]["id"]
        run = ctl(rt, "end", target)
        assert run.returncode == 0, run.stderr
        wait_for(
            lambda: {c["end"] for c in children(rt, target).values()} == {"parent_ended"},
            "every child ended with its parent",
        )
        assert f"child {alpha}  ended (parent_ended)" in ctl(rt, "ls").stdout
        one_line_failure(
            ctl(rt, "messages", target, "--child", alpha),
            f"child {alpha!r} ended with its execution",
        )
        one_line_failure(ctl(rt, "messages", target, "--child", "nope"), "has no child 'nope'")
        stopped = json.loads(ctl(rt, "cancel", target, "--child", alpha, "--json").stdout)
        assert stopped == {
            "sessionId": target,
            "childId": alpha,
            "stopped": False,
            "status": "ended",
        }
