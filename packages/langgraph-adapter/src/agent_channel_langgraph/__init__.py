"""agent_channel_langgraph: a compiled LangGraph graph served as it is.

``agent-channel-acp serve --agent mymod:graph`` (or ``stdio``) finds this adapter by its
entry point and runs the graph (one whose state holds ``messages``, such as the prebuilt
ReAct agent) as its execution's consumer: operators' messages reach its next model call
after the tool results, an interrupt stops the model call or tool in flight and waits for a
redirect, and every step is published for Zed and the consoles. ``ask_user`` is a tool an
author may add to the graph's tools. Nothing here is imported until asked for, so the
producer's discovery costs nothing for an agent of another kind.
"""

from __future__ import annotations

import importlib
from types import FunctionType
from typing import TYPE_CHECKING

__version__ = "0.1.0"

if TYPE_CHECKING:
    from ._detect import adapt as adapt
    from ._serve import LangGraphBody as LangGraphBody
    from ._serve import factory as factory
    from ._tools import ask_user as ask_user
else:  # hidden from type checkers, so a misspelt name is still an error
    # <names> written by scripts/gen_names.py from the block above: edit that, then run it
    _HOME = {
        "adapt": "_detect",
        "LangGraphBody": "_serve",
        "factory": "_serve",
        "ask_user": "_tools",
    }
    # </names>
    __all__ = sorted([*_HOME, "__version__"])

    def __getattr__(name: str) -> object:
        module = _HOME.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        loaded = importlib.import_module(f"{__name__}.{module}")
        here = globals()
        for public, home in _HOME.items():  # the module's other public names too, at once
            if home == module:
                value = getattr(loaded, public)
                if value.__module__ == loaded.__name__ and (
                    isinstance(value, FunctionType)
                    or (isinstance(value, type) and "__annotations__" not in vars(value))
                ):
                    value.__module__ = __name__
                here[public] = value  # later lookups find it directly
        return here[name]

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})
