"""The console app: the conversation, the indicator, the queue, approvals, the input line.

The link's updates only mark the screen dirty; a timer redraws at most :data:`FRAME`
times a second whatever changed since. However fast the agent streams, the UI does
bounded work per frame and the link never waits on it.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable
from typing import ClassVar

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.css.query import NoMatches
from textual.widgets import Footer, Input, Static

from ._link import Link, LinkError, Target
from ._state import State
from ._widgets import (
    EntryView,
    Picker,
    ReasoningView,
    SidePanel,
    Transcript,
    approval_markup,
    children_markup,
    field_hint,
    header_markup,
    make_view,
    question_markup,
    queue_markup,
    target_label,
)

FRAME = 1 / 10
"""Seconds between two redraws (changes in between coalesce)."""
CATCH_UP = 0.5
"""While the link is behind the stream, redraws wait up to this long (it reads meanwhile)."""

_READY = "Message the agent; Enter sends (it reads it at its next step)"
_REDIRECT = "The agent stopped and waits for you: type a redirect and press Enter"
_OBSERVING = "Observing only (attach --observe): this console cannot send, stop or answer"


class Console(App[None]):
    """``agent-channel-acp attach``: one operator's view of one running execution."""

    TITLE = "agent-channel console"
    ENABLE_COMMAND_PALETTE = False
    CSS = """
    #header { height: 1; padding: 0 1; background: $panel; }
    #body { height: 1fr; }
    #log { width: 1fr; padding: 0 1; }
    SidePanel { width: 38; padding: 0 1; border-left: solid $panel; }
    #approval { margin-bottom: 1; }
    #approval.active { border: round $warning; padding: 0 1; }
    #queue { margin-bottom: 1; }
    #children { margin-bottom: 1; }
    #help { color: $text-muted; }
    .entry { margin-bottom: 1; }
    .tool { border: round $panel; padding: 0 1; }
    .tool.status-in_progress { border: round $accent; }
    .tool.status-completed { border: round $success; }
    .tool.status-failed, .tool.status-cancelled { border: round $error; }
    .tool.selected { border: double $accent; }
    .queued { color: $warning; }
    #picker { width: 90%; height: auto; max-height: 80%; border: round $accent;
              padding: 0 1; background: $surface; }
    Picker { align: center middle; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "interrupt", "interrupt", priority=True),
        Binding("ctrl+t", "cancel_tool", "cancel tool", priority=True),
        Binding("ctrl+g", "next_tool", "next tool", priority=True),
        Binding("ctrl+w", "withdraw", "withdraw", priority=True),
        Binding("ctrl+o", "next_child", "next child", priority=True),
        Binding("ctrl+e", "steer_child", "steer child", show=False, priority=True),
        Binding("ctrl+x", "stop_child", "stop child", show=False, priority=True),
        Binding("ctrl+r", "read_child", "read child", show=False, priority=True),
        Binding("ctrl+y", "allow", "allow", priority=True),
        Binding("ctrl+n", "reject", "reject", priority=True),
        Binding("ctrl+q", "quit", "quit", priority=True),
        Binding("pageup", "page_up", "scroll", key_display="pgup/pgdn", priority=True),
        Binding("pagedown", "page_down", "scroll", show=False, priority=True),
        Binding("end", "latest", "latest", priority=True),
    ]

    def __init__(
        self, *, target: str | None = None, pid: int | None = None, observe: bool = False
    ) -> None:
        super().__init__()
        self.state = State()
        self.link = Link(
            self.state, target=target, pid=pid, choose=self._choose, observe=observe, forms=True
        )
        self.link.on_change = self._mark
        self.selected_tool: str | None = None
        self.selected_child: str | None = None
        """The child the child keys act on (K12), chosen with ctrl+o."""
        self._views: dict[str, EntryView | ReasoningView] = {}
        self._dirty = True
        self._shown: dict[str, str] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._drawn = 0.0
        self.frames = 0
        """Redraws so far (tests and the benchmark wait on them)."""

    # -- layout ------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Static(id="header")
        with Horizontal(id="body"):
            yield Transcript(id="log")
            yield SidePanel()
        yield Input(placeholder=_READY, id="input")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#input", Input).focus()
        self.set_interval(FRAME, self._draw)
        self.run_worker(self.link.run(), name="link", exit_on_error=False)

    # -- drawing -----------------------------------------------------------------------

    def _mark(self) -> None:
        self._dirty = True

    def _draw(self) -> None:
        try:
            log = self.query_one("#log", Transcript)
        except NoMatches:
            return  # a frame that fires while the screen is torn down
        log.keep_up()  # what the last frame added may have been laid out only since
        if not self._dirty:
            return
        now = time.monotonic()
        if self.link.behind() and now - self._drawn < CATCH_UP:
            return  # a frame costs more than the reads it would delay: catch up first
        self._drawn = now
        self._dirty = False
        state = self.state
        for key in state.removed:
            view = self._views.pop(key, None)
            if view is not None:
                view.remove()
        state.removed.clear()
        fresh: list[EntryView | ReasoningView] = []
        for key in dict.fromkeys(state.changed):
            entry = state.entries.get(key)
            if entry is None:
                continue
            view = self._views.get(key)
            if view is None:
                view = self._views[key] = make_view(entry)
                fresh.append(view)
            else:
                view.refresh_entry(selected=key == self.selected_tool)
        state.changed.clear()
        if fresh:
            log.mount_all(fresh)
            for view in fresh:
                view.refresh_entry(selected=view.entry.key == self.selected_tool)
        self._select_default()
        self._prompt()
        self._put("#header", header_markup(state))
        self._put("#queue", queue_markup(state))
        self._put("#children", children_markup(state, self.selected_child))
        form = state.question
        asking = question_markup(form) if form is not None else approval_markup(state.approval)
        if self._put("#approval", asking):
            self.query_one("#approval").set_class(bool(asking), "active")
        log.keep_up()
        self.frames += 1

    def _prompt(self) -> None:
        """The input line says what Enter does: answer the question's field while one waits."""
        form = self.state.question
        current = form.current if form is not None else None
        if self.state.role == "observer":
            placeholder = _OBSERVING
        elif current is None:
            placeholder = self._shown.get("ready", _READY)
        else:
            which = f" ({current.title})" if form is not None and len(form.fields) > 1 else ""
            placeholder = f"Answer the agent{which}: {field_hint(current)}, then Enter"
        if self._shown.get("placeholder") != placeholder:
            self._shown["placeholder"] = placeholder
            self.query_one("#input", Input).placeholder = placeholder

    def _put(self, selector: str, markup: str) -> bool:
        """Update a panel only when its text changed (an update costs a layout)."""
        if self._shown.get(selector) == markup:
            return False
        self._shown[selector] = markup
        self.query_one(selector, Static).update(markup)
        return True

    def _select_default(self) -> None:
        """Keep the selection on a running tool: the newest, unless one is chosen."""
        running = [e.key for e in self.state.running_tools()]
        if self.selected_tool in running:
            return
        old = self.selected_tool
        self.selected_tool = running[-1] if running else None
        for key in (old, self.selected_tool):
            view = self._views.get(key) if key else None
            if view is not None:
                view.refresh_entry(selected=key == self.selected_tool)

    def _observing(self) -> bool:
        """An observer's keys do nothing on the server (A14): say so instead of trying."""
        if self.state.role != "observer":
            return False
        self.note("observing only: attach without --observe to drive")
        return True

    def note(self, text: str) -> None:
        self.state.note(text)
        self._mark()

    # -- operator actions --------------------------------------------------------------

    def _spawn(self, work: Awaitable[object]) -> None:
        task = asyncio.ensure_future(self._guard(work))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _guard(self, work: Awaitable[object]) -> None:
        try:
            await work
        except LinkError as e:
            self.note(f"not done: {e}")

    async def on_input_submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        if self.state.question is not None and self.state.role != "observer":
            event.input.value = ""
            self.link.fill(text)  # while the model asks, Enter answers (Q2)
            self._mark()
            return
        if not text:
            return
        event.input.value = ""
        if self._observing():
            return
        self._ready_text(_READY)
        self._spawn(self.link.post(text))

    def action_interrupt(self) -> None:
        if isinstance(self.screen, Picker):
            self.screen.dismiss(None)
            return
        if self._observing():
            return
        self._ready_text(_REDIRECT)
        self.query_one("#input", Input).focus()
        self._spawn(self.link.cancel())

    def _ready_text(self, placeholder: str) -> None:
        """What the input line says when no question waits (a redirect after Esc, or not)."""
        self._shown["ready"] = placeholder
        self._prompt()

    def action_cancel_tool(self) -> None:
        if self._observing():
            return
        key = self.selected_tool
        if key is None:
            self.note("no tool call is running")
            return
        entry = self.state.entries.get(key)
        title = entry.title if entry else key

        async def cancel() -> None:
            if not await self.link.cancel_tool(key.removeprefix("tool:")):
                self.note(f"could not cancel {title} (finished, or not cancellable alone)")

        self._spawn(cancel())

    def action_page_up(self) -> None:
        self.query_one("#log", Transcript).scroll_page_up(animate=False)

    def action_page_down(self) -> None:
        self.query_one("#log", Transcript).scroll_page_down(animate=False)

    def action_latest(self) -> None:
        """End: the end of the conversation (following it again), and of the input line."""
        log = self.query_one("#log", Transcript)
        log.follow = True
        log.scroll_end(animate=False)
        self.query_one("#input", Input).action_end()

    def action_next_tool(self) -> None:
        running = [e.key for e in self.state.running_tools()]
        if not running:
            return
        i = running.index(self.selected_tool) if self.selected_tool in running else -1
        old, self.selected_tool = self.selected_tool, running[(i + 1) % len(running)]
        for key in (old, self.selected_tool):
            view = self._views.get(key) if key else None
            if view is not None:
                view.refresh_entry(selected=key == self.selected_tool)

    # -- children (K11, K12) ---------------------------------------------------------------

    def action_next_child(self) -> None:
        ids = [str(c.get("id")) for c in self.state.children]
        if not ids:
            self.note("this execution has no children")
            return
        i = ids.index(self.selected_child) if self.selected_child in ids else -1
        self.selected_child = ids[(i + 1) % len(ids)]
        self._mark()

    def _child(self) -> tuple[str, str] | None:
        """The selected child's id and name, or a note saying none is."""
        child = next((c for c in self.state.children if c.get("id") == self.selected_child), None)
        if child is None:
            self.note("no child is selected (ctrl+o selects one)")
            return None
        return str(child.get("id")), str(child.get("name", "?"))

    def action_steer_child(self) -> None:
        """Steer the selected child with the input line's text."""
        if self._observing() or (child := self._child()) is None:
            return
        inp = self.query_one("#input", Input)
        text = inp.value.strip()
        if not text:
            self.note("type the steer in the input line, then ctrl+e")
            return
        inp.value = ""
        child_id, name = child

        async def steer() -> None:
            outcome = await self.link.steer_child(child_id, text)
            self.note(f"steer for child {name}: {outcome}")

        self._spawn(steer())

    def action_stop_child(self) -> None:
        if self._observing() or (child := self._child()) is None:
            return
        child_id, name = child

        async def stop() -> None:
            stopped = await self.link.stop_child(child_id)
            self.note(f"stopped child {name}" if stopped else f"child {name} had ended")

        self._spawn(stop())

    def action_read_child(self) -> None:
        """The selected child's last messages, as a note in the conversation."""
        if (child := self._child()) is None:
            return
        child_id, name = child

        async def read() -> None:
            tail = await self.link.child_tail(child_id)
            lines = [f"{m.get('role', '?')}: {m.get('text', '')}" for m in tail]
            self.note("\n".join([f"child {name}, its last messages:", *lines]))

        self._spawn(read())

    def action_withdraw(self) -> None:
        if self._observing():
            return
        mine = self.state.mine_queued()
        if not mine:
            self.note("nothing of yours is waiting in the queue")
            return
        message = mine[-1]

        async def withdraw() -> None:
            if not await self.link.withdraw(message.id):
                self.note(f"too late to withdraw: the agent already read {message.text!r}")

        self._spawn(withdraw())

    def _answer(self, allow: bool) -> None:
        if self.state.question is not None:
            if allow:
                self.note("type the answer to the agent's question and press Enter")
            elif not self._observing():
                self.link.decline()
            return
        approval = self.state.approval
        if approval is None:
            self.note("no approval is waiting")
            return
        wanted = ("allow_once", "allow_always") if allow else ("reject_once", "reject_always")
        option = next((o for o in approval["options"] if o.get("kind") in wanted), None)
        found = option.get("optionId") if option else None
        option_id = None if found is None else str(found)
        if allow and option_id is None:
            self.note("this request offers no allow option")
            return
        self.link.answer(option_id)
        self._mark()

    def action_allow(self) -> None:
        self._answer(True)

    def action_reject(self) -> None:
        self._answer(False)

    def exit_status(self, verb: str) -> int:
        """After the app closed: 1 if the execution it watched failed, said in one line on
        stderr (the screen that said it is gone), else 0."""
        ended = self.state.ended
        if ended is None or not ended.get("error"):
            return 0
        sys.stderr.write(f"agent-channel-acp: {verb}: the execution failed: {ended['error']}\n")
        return 1

    # -- the picker --------------------------------------------------------------------

    async def _choose(self, targets: list[Target]) -> Target | None:
        picked: asyncio.Future[int | None] = asyncio.get_running_loop().create_future()
        labels = [target_label(execution) for _, execution in targets]

        def done(index: int | None) -> None:
            if not picked.done():
                picked.set_result(index)

        await self.push_screen(Picker(labels), done)
        index = await picked
        if index is None:
            self.exit()
            return None
        return targets[index]


def run_console(target: str | None, *, observe: bool = False) -> int:
    """Run the console in this terminal; the exit status."""
    app = Console(target=target, observe=observe)
    app.run()
    return app.exit_status("attach")
