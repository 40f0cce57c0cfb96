"""The ``answer`` verb (Q4; docs/questions.md), a subprocess against ``serve`` running
``question_agents:asking_agent``: no client is attached, so the question waits for a
driver, and the operator answers it from a shell."""

from __future__ import annotations

import json
from pathlib import Path

from serving import ctl, execution, messages, one_line_failure, serving, wait_for

AGENT = ("--agent", "question_agents:asking_agent", "--input", "free")


def test_q4_the_answer_verb_answers_the_pending_question(tmp_path: Path) -> None:
    rt = tmp_path / "rt"
    with serving(rt, *AGENT) as served:
        (target,) = served.ids()
        wait_for(lambda: "pendingQuestion" in execution(rt, target), "the question pending")
        question = execution(rt, target)["pendingQuestion"]
        assert question["text"] == "What is the deadline?" and question["childId"] is None
        assert "question pending" in ctl(rt, "ls").stdout

        run = ctl(rt, "answer", target[:6], "Friday noon")
        assert run.returncode == 0, run.stderr
        assert run.stdout.strip() == f"answered the question of {target}"
        wait_for(
            lambda: "answer: Friday noon" in [m["text"] for m in messages(rt, target)],
            "the model reading the answer",
        )
        assert "pendingQuestion" not in execution(rt, target)

        again = ctl(rt, "answer", target, "late", "--json")
        assert again.returncode == 1
        assert json.loads(again.stdout)["answered"] is False
        one_line_failure(ctl(rt, "answer", target, "late"), "no question is waiting")
        one_line_failure(ctl(rt, "answer", target, "  "), "the answer is empty")
