"""The console's widgets: one per conversation entry, the side panel, the picker."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from rich.markup import escape
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Collapsible, OptionList, Static
from textual.widgets.option_list import Option

from ._state import INTERRUPTED, Approval, Entry, Field, Form, State, compact

if TYPE_CHECKING:
    from ...wire._frames import Execution

_WHO = {
    "operator": "[b $accent]operator[/] ▸ ",
    "user": "[b]user[/] ▸ ",
    "system": "[dim]system ▸ ",
    "agent": "[b $success]agent[/] ▸ ",
    "queued": "[b $warning]queued[/] ▸ ",
    "note": "[i $secondary]— ",
}
SHOWN_TEXT = 1500
"""Characters of one message drawn (its tail); the fold keeps more (``MAX_TEXT``)."""
_STATUS_STYLE = {
    "pending": "$warning",
    "in_progress": "$accent",
    "completed": "$success",
    "failed": "$error",
    "cancelled": "$error",
}


def entry_markup(entry: Entry, *, selected: bool = False) -> str:
    """Rich markup for one entry (tool cards: status, title, arguments, result)."""
    if entry.kind == "tool":
        style = _STATUS_STYLE.get(entry.status, "")
        mark = "▶ " if selected else ""
        head = f"{mark}[b {style}]{entry.label}[/] [b]{escape(entry.title)}[/]"
        if entry.tool_kind and entry.tool_kind != "other":  # "other" says nothing
            head += f" [dim]({escape(entry.tool_kind)})[/]"
        lines = [head]
        if entry.args is not None:
            lines.append(f"[dim]args:[/] {escape(compact(entry.args))}")
        if entry.result:
            lines.append(f"[dim]result:[/] {escape(entry.result[:2000])}")
        return "\n".join(lines)
    who = _WHO.get(entry.kind, "")
    text = entry.text.strip()
    if len(text) > SHOWN_TEXT:  # laying out a long text costs each frame: show its tail
        cut = len(text) - SHOWN_TEXT
        text = f"[dim](… {cut} characters before; `messages --full` has them)[/] " + escape(
            text[cut:]
        )
    else:
        text = escape(text)
    if entry.kind == "queued":
        text += " [dim](queued: the agent reads it at its next step)[/]"
    if entry.interrupted:  # like a cancelled card: said on the line, in the error colour
        text = f"[dim strike]{text}[/] [b $error]({INTERRUPTED})[/]"
    closing = "[/]" if entry.kind in ("system", "note") else ""
    return f"{who}{text}{closing}"


class EntryView(Static):
    """A message, a note or a tool card; redrawn from its entry when it changes.

    A streaming message changes every frame but its height only every few lines, and a
    layout (every widget's) cost more than the rest of a frame: so a redraw repaints this
    widget alone unless the new text needs a different height."""

    def __init__(self, entry: Entry) -> None:
        super().__init__(classes=f"entry {entry.kind}")
        self.entry = entry

    def refresh_entry(self, *, selected: bool = False) -> None:
        if self.entry.kind == "tool":
            self.set_class(True, "tool")
            for status in _STATUS_STYLE:
                self.set_class(self.entry.status == status, f"status-{status}")
            self.set_class(selected, "selected")
        width, height = self.size
        self.update(entry_markup(self.entry, selected=selected), layout=False)
        if not width or self.visual.get_height(self.styles, width) != height:  # pyright: ignore[reportArgumentType]
            self.refresh(layout=True)  # a layout is the whole screen's: only when it grew


class Transcript(VerticalScroll):
    """The conversation: it follows its end until the operator scrolls up, and again once
    they scroll back down to it (or press End).

    Following is a flag set by where the operator scrolls, not a look at the position when
    something arrives: content grows after a redraw (a new card, a scrollbar that narrows
    every line), and a view that judged "at the end?" from the position then stopped
    following for good."""

    follow = True

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if new_value >= self.max_scroll_y:
            self.follow = True
        elif new_value < old_value:  # only the operator moves it up
            self.follow = False

    def keep_up(self) -> None:
        """Scroll to the end if following and the end moved (called every frame)."""
        if self.follow and self.scroll_y < self.max_scroll_y:
            self.scroll_end(animate=False)


class ReasoningView(Collapsible):
    """Model reasoning, folded until the operator opens it."""

    def __init__(self, entry: Entry) -> None:
        self.entry = entry
        self._body = Static(classes="reasoning-text")
        super().__init__(self._body, title="reasoning", collapsed=True, classes="entry reasoning")

    def refresh_entry(self, *, selected: bool = False) -> None:
        text = self.entry.text.strip()
        mark = f"{INTERRUPTED}, " if self.entry.interrupted else ""
        self.title = f"reasoning ({mark}{len(text)} characters)"
        self._body.update(escape(text))


def make_view(entry: Entry) -> EntryView | ReasoningView:
    return ReasoningView(entry) if entry.kind == "reasoning" else EntryView(entry)


def header_markup(state: State) -> str:
    activity = state.activity
    style = (
        "$success"
        if activity.startswith("running")
        else "$warning"
        if activity.startswith("waiting")
        else "$error"
        if activity.startswith(("failed", "disconnected"))
        else "$secondary"
    )
    role = state.role or "not bound"
    title = escape(state.title or "agent-channel console")
    short = state.execution_id[:8]
    return f"[b]{title}[/] [dim]{short}[/]  ·  [b]{role}[/]  ·  [b {style}]● {escape(activity)}[/]"


def queue_markup(state: State) -> str:
    if not state.queue:
        return "[b]Pending queue[/]\n[dim]nothing waiting[/]"
    lines = [f"[b]Pending queue[/] ({len(state.queue)})"]
    for q in state.queue:
        who = "you" if q.mine else escape(q.client)
        lines.append(f"• {escape(q.text[:120])} [dim]({who})[/]")
    if state.mine_queued():
        lines.append("[dim]ctrl+w withdraws your newest[/]")
    return "\n".join(lines)


def approval_markup(approval: Approval | None) -> str:
    if approval is None:
        return ""
    call = approval["toolCall"]
    names = ", ".join(str(o.get("name", o.get("optionId", "?"))) for o in approval["options"])
    args = call.get("rawInput")
    lines = [
        "[b $warning]Approval needed[/]",
        f"[b]{escape(str(call.get('title') or call.get('toolCallId') or 'a tool call'))}[/]",
    ]
    if args is not None:
        lines.append(f"[dim]args:[/] {escape(compact(args))}")
    lines.append(f"[dim]options: {escape(names)}[/]")
    lines.append("[b]ctrl+y[/] allow  ·  [b]ctrl+n[/] reject")
    return "\n".join(lines)


def question_markup(form: Form) -> str:
    """The model's question in the side panel: the fields filled so far, the one the input
    line fills now (a choice's options numbered), and the keys that answer it."""
    lines = ["[b $warning]The agent asks[/]", f"[b]{escape(form.text)}[/]"]
    current = form.current
    many = len(form.fields) > 1
    for f in form.fields:
        if f.name in form.values:
            value = form.values[f.name]
            said = "" if value is None else escape(str(value))
            lines.append(f"[dim]✓ {escape(f.title)}: {said}[/]")
        elif many:
            mark = "▸ " if f is current else "  "
            lines.append(f"{mark}{escape(f.title)}{'' if f.required else ' [dim](optional)[/]'}")
    if current is not None:
        lines.extend(f" [b]{i}[/] {escape(c)}" for i, c in enumerate(current.choices, 1))
        lines.append(f"[dim]{escape(field_hint(current))}[/]")
    if form.error:
        lines.append(f"[$error]{escape(form.error)}[/]")
    last = current is None or current is form.fields[-1]
    lines.append(f"[b]Enter[/] {'answers' if last else 'fills it'}")
    lines.append("[b]ctrl+n[/] declines")
    return "\n".join(lines)


def field_hint(f: Field) -> str:
    """What to type for ``f`` (the side panel and the input line say it)."""
    if f.choices:
        return f"type 1-{len(f.choices)} or a choice" if len(f.choices) > 1 else "type 1"
    what = {"integer": "a whole number", "number": "a number", "boolean": "y or n"}
    hint = f"type {what.get(f.kind, 'your answer')}"
    return hint if f.required else hint + " (Enter alone skips it)"


def children_markup(state: State, selected: str | None) -> str:
    """The execution's children as a tree (K11), the selected one marked."""
    if not state.children:
        return ""
    lines = [f"[b]Children[/] ({len(state.children)})"]
    for c in state.children:
        depth = c.get("depth")
        indent = "  " * (depth - 1 if isinstance(depth, int) and depth > 0 else 0)
        status = str(c.get("status", "?"))
        if status == "ended":
            status = f"ended ({c.get('end') or '?'})"
        mark = "▸ " if c.get("id") == selected else "• "
        name = escape(str(c.get("name", "?")))
        lines.append(f"{indent}{mark}[b]{name}[/] [dim]{escape(status)}[/]")
    if selected is not None:
        lines.append("[dim]ctrl+e steer (the input line) · ctrl+x stop · ctrl+r read[/]")
    return "\n".join(lines)


class SidePanel(Vertical):
    def compose(self) -> ComposeResult:
        yield Static(id="approval")
        yield Static(id="children")
        yield Static(id="queue")
        yield Static(HELP, id="help")


HELP = (
    "[b]Keys[/]\n"
    "enter  send (queued until read)\n"
    "esc    interrupt the turn\n"
    "pgup/pgdn scroll; end  the latest\n"
    "ctrl+t cancel the selected tool\n"
    "ctrl+g select the next running tool\n"
    "ctrl+w withdraw your queued message\n"
    "ctrl+o select the next child\n"
    "ctrl+y / ctrl+n  allow / reject\n"
    "a question: Enter answers\n"
    "ctrl+q quit"
)


def target_label(execution: Execution) -> str:
    title = execution.get("title") or execution.get("id")
    parts = [
        str(execution.get("status", "?")),
        f"turn {execution.get('turnState', '?')}",
        f"{execution.get('messageCount', '?')} messages",
        f"{execution.get('clients', 0)} clients",
    ]
    if execution.get("pendingApproval"):
        parts.append("approval pending")
    if restored := execution.get("restored"):  # brought back by a restart on its store
        parts.append(f"restored {time.strftime('%H:%M', time.localtime(restored))}")
    return f"{title}  ({str(execution.get('id', ''))[:8]})  " + " · ".join(parts)


class Picker(ModalScreen[int | None]):
    """Several executions are served and none was named: choose one."""

    BINDINGS = [Binding("escape", "dismiss_none", "cancel")]

    def __init__(self, labels: list[str]) -> None:
        super().__init__()
        self._labels = labels

    def compose(self) -> ComposeResult:
        with Vertical(id="picker"):
            yield Static("[b]Choose an execution[/] (enter attaches)")
            yield OptionList(*[Option(label, id=str(i)) for i, label in enumerate(self._labels)])

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option_index)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
