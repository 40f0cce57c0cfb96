"""A demo agent for trying an operator surface by hand.

``demo`` is interactive: every operator message leads to at least one slow
tool call (``AGENT_CHANNEL_DEMO_TOOL_SECONDS``, default 1.5, so a person can
interrupt mid-tool) and then a streamed text answer that quotes what the
model saw, including tool results that were cancelled. ``task_demo`` starts
on a built-in task by itself: :data:`PLAN`, twenty tool steps of one to two
seconds (about a minute at the default), long enough to attach, message,
interrupt and redirect it. A question asked while it works is answered in
passing and the task goes on; any other message replaces the task. Then it
takes operator messages like ``demo``. Both run a scripted model unless a model is named
(``model=``, or AGENT_CHANNEL_MODEL in the environment): then they use that model on an
OpenAI-compatible server (OPENAI_BASE_URL / OPENAI_API_KEY) with the same tools. A key or a
URL alone does not switch: many shells have one set. ``model="scripted"`` forces the script.

``orchestrator`` starts on a built-in task too: it spawns three researchers of different
lengths (:data:`RESEARCH`), steers one halfway, kills one, asks the operator which findings
to lead with (:data:`QUESTION`, ``ask_user`` with two choices), and writes its answer from
what their announcements and results said; then it takes operator messages.

Load them by dotted path: ``agent_channel_react.demo:demo``.

All three are resumable in a durable execution (``serve --store``, D4): killed and started
again, each goes on from its stored conversation (the scripted model reads its position
from it). ``search``, ``read_notes`` and ``word_count`` are idempotent, so a call of theirs
in flight runs again; ``write_section`` is not, so its call gets "interrupted by a restart"
(the task's answer names it among the calls that did not finish). The orchestrator's
researchers are not brought back with it (a restored supervisor has no live children), so
its calls on them after a restart report failures; its conversation stays well formed.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Sequence

import anyio
from agent_channel import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageTool,
    ChatMessageUser,
    ContentImage,
    ContentResource,
    ContentResourceLink,
)

from ._children import children_tools
from ._factory import Body
from ._model import Model, ToolInfo
from ._questions import ask_user
from ._react import ReactAgent, react
from ._scripted import (
    ScriptedModel,
    ScriptFunction,
    ScriptItem,
    ScriptStep,
    call,
    reply,
    tool_call,
)
from ._state import AgentState
from ._tool import Tool, tool

TOOL_SECONDS_ENV = "AGENT_CHANNEL_DEMO_TOOL_SECONDS"
MODEL_ENV = "AGENT_CHANNEL_MODEL"
"""Names the demo's real model when ``model=`` does not."""
TOPIC = "interruptible agents"
SECTIONS = (
    "messages at step boundaries",
    "interrupts",
    "cancelling one tool call",
    "approvals",
    "several operators",
)
TASK = (
    f"Prepare a briefing on {TOPIC}, one section each on " + ", ".join(SECTIONS) + ": "
    "for each, search, read the notes, write the section and count its words; then answer."
)
PROMPT = "You are a demo agent. Use the tools to look things up before you answer."


def tool_seconds() -> float:
    """How long a demo tool takes (read at call time, so tests can change it); some tools
    take a third more or less, so the default 1.5 gives steps of one to two seconds."""
    try:
        return max(0.0, float(os.environ.get(TOOL_SECONDS_ENV, "1.5")))
    except ValueError:
        return 1.5


@tool(kind="search", title="Searching for {query}", idempotent=True)
async def search(query: str) -> str:
    """Search the demo knowledge base.

    Args:
        query: What to look for.
    """
    await anyio.sleep(tool_seconds())
    return f"3 results for {query!r}: an overview, a how-to and a design note."


@tool(kind="read", title="Reading notes on {topic}", idempotent=True)
async def read_notes(topic: str) -> str:
    """Read the notes kept on a topic.

    Args:
        topic: The topic.
    """
    await anyio.sleep(tool_seconds() * 4 / 3)
    return (
        f"Notes on {topic}: an operator can send a message at any time, and it is read at the "
        "next step; an interrupt stops the current step at once."
    )


@tool(kind="edit", title="Writing the section on {title}")
async def write_section(title: str, text: str) -> str:
    """Write one section of the briefing.

    Args:
        title: The section's title.
        text: Its text.
    """
    await anyio.sleep(tool_seconds())
    return f"Section {title!r} written ({len(text)} characters)."


@tool(kind="think", title="Counting words", idempotent=True)
async def word_count(text: str) -> int:
    """Count the words of a text.

    Args:
        text: The text.
    """
    await anyio.sleep(tool_seconds() * 2 / 3)
    return len(text.split())


TOOLS: tuple[Tool, ...] = (search, read_notes, write_section, word_count)
SUMMARY = "Interruptible agents take messages at step boundaries and stop at once when interrupted."


def _plan() -> tuple[ScriptStep, ...]:
    steps: list[ScriptStep] = []
    for i, section in enumerate(SECTIONS):
        text = f"{section.capitalize()}: {SUMMARY}"
        first = "First, a search." if i == 0 else f"Next section: {section}. A search first."
        steps += [
            call(tool_call("search", query=f"{TOPIC}: {section}"), content=first),
            call(tool_call("read_notes", topic=section), content="Now the notes."),
            call(tool_call("write_section", title=section, text=text), content="Writing it up."),
            call(tool_call("word_count", text=text), content="Checking the length."),
        ]
    return tuple(steps)


PLAN = _plan()
"""``task_demo``'s steps: four tool calls for each of :data:`SECTIONS`."""


def _last_user(messages: Sequence[ChatMessage]) -> int:
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], ChatMessageUser):
            return i
    return -1


def _describe(message: ChatMessage) -> str:
    extras: list[str] = []
    if not isinstance(message.content, str):
        for p in message.content:
            if isinstance(p, ContentImage):
                extras.append(f"an image ({p.mime_type})")
            elif isinstance(p, ContentResource):
                extras.append(f"a resource {p.uri}")
            elif isinstance(p, ContentResourceLink):
                extras.append(f"a link to {p.uri}")
    text = f"You said: {message.text.strip()!r}"
    return f"{text}, with {', '.join(extras)}" if extras else text


def _interrupted(messages: Sequence[ChatMessage], upto: int) -> list[str]:
    """Tool calls that were cancelled or failed since the last plain answer."""
    notes: list[str] = []
    for m in reversed(messages[:upto]):
        if isinstance(m, ChatMessageAssistant) and not m.tool_calls:
            break
        if isinstance(m, ChatMessageTool) and m.error is not None:
            notes.append(f"{m.function} ({m.error}: {m.text or m.error})")
    return list(reversed(notes))


def _asks(message: ChatMessage) -> bool:
    """An operator's question (answered in passing while a task runs)."""
    return (
        isinstance(message, ChatMessageUser)
        and message.source != "task"
        and message.text.rstrip().endswith("?")
    )


_REDIRECT = re.compile(
    r"^\s*(change of plans?|new plan|new task|instead|forget (?:that|it))\b[\s:,.-]*", re.I
)
_INSTEAD = re.compile(r"[\s,]*\binstead\b[\s.!]*$", re.I)


def _redirects(message: ChatMessage) -> bool:
    """An operator's message that replaces the task ("Change of plan: …", "… instead");
    any other is a note the task takes along."""
    text = message.text.strip()
    return bool(_REDIRECT.match(text) or _INSTEAD.search(text))


def _subject(text: str) -> str:
    """What a redirect asks for, without its framing: the words to search for."""
    text = _INSTEAD.sub("", _REDIRECT.sub("", text.strip())).strip().rstrip(".!")
    return text[:80] or "(empty)"


def _open_task(messages: Sequence[ChatMessage], upto: int) -> int | None:
    """The task message still being worked on before ``upto``: no answer since, and no
    message that replaced it (questions and notes do not)."""
    for i in range(upto - 1, -1, -1):
        m = messages[i]
        if isinstance(m, ChatMessageAssistant) and not m.tool_calls:
            return None
        if isinstance(m, ChatMessageUser):
            if m.source == "task":
                return i
            if _redirects(m):
                return None
    return None


def _notes(messages: Sequence[ChatMessage], task: int) -> list[str]:
    """The operator's notes (neither questions nor redirects) since the task began."""
    return [
        m.text.strip()
        for m in messages[task + 1 :]
        if isinstance(m, ChatMessageUser) and m.source != "task" and not _asks(m)
    ]


def _task_step(
    messages: Sequence[ChatMessage], task: int, asked: ChatMessage | None, delay: float
) -> ScriptItem:
    """The task's next step (``asked``: a question or a note it answers first), or its
    answer once :data:`PLAN` is done."""
    after = messages[task + 1 :]
    rounds = sum(1 for m in after if isinstance(m, ChatMessageAssistant) and m.tool_calls)
    if rounds < len(PLAN):
        step = PLAN[rounds]
        if asked is None:
            return dataclasses.replace(step, delay=delay)
        section = SECTIONS[rounds // 4]
        where = f"step {rounds + 1} of {len(PLAN)} (the section on {section})"
        if _asks(asked):
            content = (
                f"You asked {asked.text.strip()!r}: I am writing a briefing on {TOPIC}, "
                f"{where}. Carrying on."
            )
        else:
            content = (
                f"Noted: {asked.text.strip()!r}. I will take it into the briefing; "
                f"carrying on with {where}."
            )
        return dataclasses.replace(step, content=content, delay=delay)
    results = sum(1 for m in after if isinstance(m, ChatMessageTool))
    body = f"Briefing: {SUMMARY} (Steps done: {results} tool results.)"
    notes = _notes(messages, task)
    if notes:
        body += " As you asked: " + " ".join(notes)
    notes = _interrupted(messages, len(messages))
    if notes:
        body += " Note: these tool calls did not finish: " + "; ".join(notes)
    return reply(body, delay=min(0.5, delay))


def demo_script(messages: Sequence[ChatMessage], tools: Sequence[ToolInfo]) -> ScriptItem:
    """The demo model: tool calls first, then an answer about what it saw."""
    slow = min(0.5, tool_seconds() / 3)
    u = _last_user(messages)
    if u < 0:
        return reply("Hello! Send me a message and I will look it up.", delay=slow)
    user = messages[u]
    after = messages[u + 1 :]
    if isinstance(user, ChatMessageUser) and user.source == "task":
        return _task_step(messages, u, None, 2 * slow)
    task = _open_task(messages, u) if not _redirects(user) else None
    if task is not None:  # a question or a note while the task runs: taken in its next step
        answered = any(isinstance(m, ChatMessageAssistant) for m in after)
        return _task_step(messages, task, None if answered else user, 2 * slow)
    results = [m for m in after if isinstance(m, ChatMessageTool)]
    rounds = sum(1 for m in after if isinstance(m, ChatMessageAssistant) and m.tool_calls)
    if rounds == 0:
        query = _subject(user.text)
        return call(tool_call("search", query=query), content="Let me look that up.")
    last = results[-1] if results else None
    found = f"The search said: {last.text or last.error}" if last else "Nothing came back."
    body = f"{_describe(user)}. {found}"
    notes = _interrupted(messages, u)
    if notes:
        body += " Note: before your message, these tool calls did not finish: " + "; ".join(notes)
    return reply(body, delay=slow)


def _model(model: str | None) -> Model:
    name = model or os.environ.get(MODEL_ENV)
    if not name or name == "scripted":
        return ScriptedModel(demo_script, name="demo-scripted")
    from ._openai import OpenAIModel

    return OpenAIModel(name)


def demo_agent(model: str | None = None) -> ReactAgent:
    """The demo's react agent (interactive: no submit tool)."""
    return react(model=_model(model), tools=TOOLS, prompt=PROMPT, submit=False)


def demo(model: str | None = None) -> Body:
    """Factory for an interactive demo execution that waits for the operator's messages."""
    agent = demo_agent(model)

    async def body() -> AgentState:
        return await agent(AgentState())

    return body


def task_demo(model: str | None = None) -> Body:
    """Factory for a demo execution that works a built-in task by itself, then stays interactive."""
    agent = demo_agent(model)

    async def body() -> AgentState:
        return await agent(AgentState(messages=[ChatMessageUser(content=TASK, source="task")]))

    return body


# -- the orchestrator ----------------------------------------------------------------------

RESEARCH = (("runtimes", 2), ("cancellation", 6), ("history", 12))
"""The orchestrator's researchers: a topic each and how many searches it takes."""
STEERED, KILLED = "cancellation", "history"
STEER = "Focus on how a cancelled call still gets its result."
ORCHESTRATOR_TASK = (
    f"Write a short answer on {TOPIC}. Start one researcher per topic ("
    + ", ".join(topic for topic, _ in RESEARCH)
    + f"); when the first is done, tell the {STEERED} researcher to focus on cancelled calls' "
    f"results, stop the {KILLED} researcher (too slow), then answer from what they found."
)
ORCHESTRATOR_PROMPT = (
    "You coordinate researchers: start them with spawn_agent, redirect them with steer_agent, "
    "stop them with kill_agent, and wait_for_agent when you need a result. Their results "
    "also arrive as messages when they end. Write the final answer from what they found."
)
QUESTION = "Which findings should the answer lead with?"
"""The orchestrator's one question to the operator (``ask_user``, with two choices)."""
RESEARCHER_PROMPT = "You are a researcher. Search as many times as the task says, then report."
_STEPS = re.compile(r"in (\d+) searches")
_STARTED = re.compile(r"^Started (\S+) \(id ([0-9a-f]+)\)")
_ENDS = ("wait_for_agent", "kill_agent")
"""The child tools whose results tell how a child ended (its announcement is then not sent)."""
_ANSWER = "Answer on"
_REPORT = re.compile(r"Child (\S+) \(id [0-9a-f]+\) ([^\n]*)(?:\n\nResult:\n([^\n]*))?")


def research_task(topic: str, searches: int) -> str:
    """A researcher's task (the scripted researcher reads the number of searches in it)."""
    return f"Research {topic} for a briefing on {TOPIC}, in {searches} searches."


def researcher_script(messages: Sequence[ChatMessage], tools: Sequence[ToolInfo]) -> ScriptItem:
    """A researcher: the searches its task asks for, then its findings, steers included."""
    slow = min(0.5, tool_seconds() / 3)
    task = next((m for m in messages if isinstance(m, ChatMessageUser)), None)
    if task is None:
        return reply("No task was given.")
    found = _STEPS.search(task.text)
    searches = int(found.group(1)) if found else 1
    topic = task.text.removeprefix("Research ").split(" for a briefing")[0]
    rounds = sum(1 for m in messages if isinstance(m, ChatMessageAssistant) and m.tool_calls)
    if rounds < searches:
        query = f"{topic}, part {rounds + 1} of {searches}"
        return call(tool_call("search", query=query), content=f"Searching: {query}.", delay=slow)
    told = [m.text for m in messages if isinstance(m, ChatMessageUser) and m.source == "parent"]
    body = f"Findings on {topic}: {searches} searches, each with an overview and a design note."
    if told:
        body += " As asked: " + " ".join(told)
    return reply(body, delay=slow)


def _spawned(messages: Sequence[ChatMessage]) -> dict[str, str]:
    """The researchers started so far: topic → child id, read from spawn_agent's results."""
    out: dict[str, str] = {}
    for m in messages:
        if isinstance(m, ChatMessageTool) and m.function == "spawn_agent":
            started = _STARTED.match(m.text)
            if started:
                out[started.group(1)] = started.group(2)
    return out


def _heard(messages: Sequence[ChatMessage]) -> list[str]:
    """What the researchers reported, from announcements and waits: who, how it ended, and
    the first line of its result."""
    heard: list[str] = []
    for m in messages:
        child = isinstance(m, ChatMessageUser) and m.source == "child"
        if child or (isinstance(m, ChatMessageTool) and m.function in _ENDS):
            for name, how, result in _REPORT.findall(m.text):
                heard.append(f"{name} {how}" + (f" {result}" if result else ""))
    return heard


def orchestrator_script(messages: Sequence[ChatMessage], tools: Sequence[ToolInfo]) -> ScriptItem:
    """The orchestrator: spawn three, wait for the first, steer one, kill one, answer."""
    slow = min(0.5, tool_seconds() / 3)
    u = _last_user(messages)
    user = messages[u] if u >= 0 else None
    tasks = [i for i, m in enumerate(messages) if getattr(m, "source", None) == "task"]
    if not isinstance(user, ChatMessageUser) or not tasks:
        return reply("Nothing to do yet: I work on the task I am started with.")
    task = tasks[-1]
    answer = next((m for m in messages[task:] if m.text.startswith(_ANSWER)), None)
    heard_since = not any(isinstance(m, ChatMessageAssistant) for m in messages[u + 1 :])
    aside = user.source not in ("task", "child") and heard_since  # the operator, or a note
    if aside and answer is not None:
        return reply(
            f"{_describe(user)}. My answer is above ({answer.text.split(':', 1)[0]}); "
            "the researchers are done, so start me again for a new task.",
            delay=slow,
        )
    ids = _spawned(messages[task:])
    rounds = sum(1 for m in messages[task:] if isinstance(m, ChatMessageAssistant) and m.tool_calls)
    first = RESEARCH[0][0]
    steps: list[ScriptStep] = [
        call(
            *(
                tool_call("spawn_agent", agent="researcher", task=research_task(t, n), name=t)
                for t, n in RESEARCH
            ),
            content="Starting three researchers.",
        ),
        call(tool_call("wait_for_agent", ids=[ids.get(first, "")]), content=f"Waiting: {first}."),
        call(
            tool_call("steer_agent", id=ids.get(STEERED, ""), message=STEER),
            content=f"Redirecting {STEERED}.",
        ),
        call(
            tool_call("kill_agent", id=ids.get(KILLED, ""), reason="too slow for this answer"),
            content=f"Stopping {KILLED}.",
        ),
        call(
            tool_call("ask_user", question=QUESTION, choices=[t for t, _ in RESEARCH[:2]]),
            content="Asking the operator.",
        ),
        call(tool_call("wait_for_agent", ids=[ids.get(STEERED, "")]), content="Waiting."),
    ]
    if rounds < len(steps):
        step = steps[rounds]
        if aside:  # taken in passing: the plan goes on
            step = dataclasses.replace(
                step, content=f"Noted: {user.text.strip()!r}. Going on: {step.content}"
            )
        return dataclasses.replace(step, delay=slow)
    heard = _heard(messages[task:])
    body = f"{_ANSWER} {TOPIC}, from {len(heard)} researcher report(s): " + " ".join(heard)
    asked = [
        m for m in messages[task:] if isinstance(m, ChatMessageTool) and m.function == "ask_user"
    ]
    if asked and not asked[-1].error and not asked[-1].text.startswith("No answer"):
        body += f" Leading with {asked[-1].text}, as the operator chose."
    return reply(body, delay=slow)


def _orchestrator_model(model: str | None, script: ScriptFunction, name: str) -> Model:
    chosen = model or os.environ.get(MODEL_ENV)
    if not chosen or chosen == "scripted":
        return ScriptedModel(script, name=name)
    from ._openai import OpenAIModel

    return OpenAIModel(chosen)


def researcher_agent(model: str | None = None) -> ReactAgent:
    """The orchestrator's researcher: it searches (the demo's slow tool) and reports."""
    return react(
        model=_orchestrator_model(model, researcher_script, "researcher-scripted"),
        tools=(search,),
        prompt=RESEARCHER_PROMPT,
        submit=False,
        description="searches a topic and reports its findings",
    )


def orchestrator_agent(model: str | None = None) -> ReactAgent:
    """The orchestrator's react agent, offering :func:`researcher_agent` on the same model."""
    researcher = researcher_agent(model)
    return react(
        model=_orchestrator_model(model, orchestrator_script, "orchestrator-scripted"),
        tools=(*children_tools({"researcher": researcher}), ask_user),
        prompt=ORCHESTRATOR_PROMPT,
        submit=False,
    )


def orchestrator(model: str | None = None) -> Body:
    """Factory for the orchestrator demo: it works its task with three researchers, then
    stays interactive."""
    agent = orchestrator_agent(model)

    async def body() -> AgentState:
        task = ChatMessageUser(content=ORCHESTRATOR_TASK, source="task")
        return await agent(AgentState(messages=[task]))

    return body
