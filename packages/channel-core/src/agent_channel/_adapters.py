"""Finding what runs a framework's agent object: the installed adapters, by entry point.

``--agent module:attr`` (or a Ray ``launch``) names an agent factory
(``factory(model) -> body``), or, with a framework adapter installed, the framework's own
agent object (a ``pydantic_ai.Agent``). Every runtime resolves such a name here, so none
imports an adapter, and the core imports none either: each distribution declares a function in the
``agent_channel.adapters`` entry-point group that takes the loaded object and returns the
factory to run it (or ``None`` when the object is not its framework's). An adapter checks
its framework's version and raises with one line when it is outside its supported range.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Awaitable, Callable
from functools import partial
from importlib.metadata import entry_points
from operator import attrgetter
from typing import cast

from ._loading import load_spec

GROUP = "agent_channel.adapters"
"""The entry-point group adapters register in (``name = "package.module:adapt"``)."""

Body = Callable[[], Awaitable[object]]
Factory = Callable[..., Body]
Adapter = Callable[[object], Factory | None]
"""What an entry point names: the object in, its factory out (``None``: not mine)."""


class NotAnAgent(TypeError):
    """Nothing can run the object: the message is the one line to print (F8)."""


def load_agent(spec: str) -> object:
    """The object ``spec`` (``module:attr``) names, callable or not (a framework's agent
    object need not be): :func:`agent_channel.load_spec`'s errors otherwise."""
    try:
        return load_spec(spec)
    except TypeError:  # not callable: perhaps a framework's agent; an adapter decides
        module, _, attr = spec.partition(":")
        return attrgetter(attr)(importlib.import_module(module))


def _is_factory(obj: object) -> bool:
    """A function, method, class or partial: a factory as ever, never offered to adapters
    (a framework's agent is an instance)."""
    return inspect.isroutine(obj) or isinstance(obj, type | partial)


def adapted(obj: object) -> Factory | None:
    """The factory an installed adapter makes of ``obj``, or ``None`` if none claims it.

    Adapters are tried in their names' order; each is loaded only when an object is not a
    factory, so a factory's run imports none of them.
    """
    if _is_factory(obj):
        return None
    for ep in sorted(entry_points(group=GROUP), key=lambda e: e.name):
        adapt = cast("Adapter", ep.load())
        try:
            made = adapt(obj)
        except Exception as e:  # its refusal (a framework version it does not support)
            raise NotAnAgent(f"the {ep.name} adapter refused it: {e}") from e
        if made is not None:
            return made
    return None


def as_factory(obj: object, spec: str) -> Factory:
    """``obj`` as a factory: itself when it is one, else what an adapter makes of it.

    Raises :class:`NotAnAgent` naming what was expected and what was found, or an adapter's
    refusal (a framework version it does not support).
    """
    made = adapted(obj)
    if made is not None:
        return made
    if callable(obj):
        return cast("Factory", obj)
    found = f"{type(obj).__module__}.{type(obj).__qualname__}"
    names = sorted({ep.name for ep in entry_points(group=GROUP)})
    have = f"installed adapters: {', '.join(names)}" if names else "no adapter is installed"
    raise NotAnAgent(
        f"it is a {found}, not callable: expected an agent factory (factory(model) -> async body) "
        f"or an agent object an adapter serves ({have})"
    )


def as_body(obj: object) -> Body:
    """What ``attachable().run(obj)`` runs: a framework's agent adapted (its own model),
    anything else as the body it is."""
    made = adapted(obj)
    return made(None) if made is not None else cast("Body", obj)
