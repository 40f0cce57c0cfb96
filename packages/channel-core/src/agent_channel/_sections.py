"""Named sections: what is built on a channel writes down at each checkpoint, and gets
back when its execution is restored.

A section is named by the module that owns it (``agent_channel.children``); its text is
JSON the store keeps as it is. On a restore the channel hands each section to the hook
its module registered (:func:`on_restore`), importing that module first if no hook is
registered yet: a restarted process may not have loaded it before its first execution.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from ._vars import SECTIONS

if TYPE_CHECKING:
    from ._channel import AgentChannel
    from ._store import Restored

RestoreHook = Callable[["AgentChannel", "Restored", str], None]
"""Called as an execution is restored, with its channel (items re-queued already), what
was restored and the section's text; on the thread opening the channel."""

_hooks: dict[str, RestoreHook] = {}
_lock = threading.Lock()
log = logging.getLogger("agent_channel")


def add_section(channel: AgentChannel, name: str, write: Callable[[], str]) -> Callable[[], None]:
    """Have each checkpoint of ``channel`` write section ``name`` as ``write()`` returns it,
    until the returned removal is called (one writer per name)."""
    sections = SECTIONS.get(channel, {})
    if name in sections:
        raise RuntimeError(f"section {name!r} already has a writer on this execution")
    SECTIONS.set(channel, {**sections, name: write})

    def remove() -> None:
        left = dict(SECTIONS.get(channel, {}))
        if left.get(name) is write:
            del left[name]
            SECTIONS.set(channel, left)

    return remove


def on_restore(name: str, hook: RestoreHook) -> None:
    """Register ``hook`` for section ``name`` (its module's dotted name), once per process."""
    with _lock:
        _hooks[name] = hook


def restore_sections(channel: AgentChannel, restored: Restored) -> None:
    for name, text in restored.sections.items():
        hook = _hooks.get(name)
        if hook is None and "." in name:
            try:  # a section is named by its module, which registers its hook as it loads
                importlib.import_module(name)
            except ImportError as e:
                log.warning("section %r of a restored execution not restored: %s", name, e)
                continue
            hook = _hooks.get(name)
        if hook is not None:
            hook(channel, restored, text)
