"""agent_channel_acp: drive an agent-channel agent from any ACP client.

The producer binds each ACP session to the :class:`~agent_channel.AgentRef` of
one top-level execution it starts itself. Importing this package is cheap;
the ACP SDK is imported when a server is first used.
"""

# The public names are listed once: the block below, which type checkers and IDEs read; at
# run time each loads its module when first asked for (PEP 562). The run-time table,
# ``__all__`` and ``__dir__`` come from the block (scripts/gen_names.py;
# tests/acp/test_public_names.py fails while they differ).

from __future__ import annotations

import importlib
from types import FunctionType
from typing import TYPE_CHECKING

from ._version import __version__ as __version__

if TYPE_CHECKING:
    from .agent.attach._server import AttachServer as AttachServer
    from .agent.stdio._process import run_stdio as run_stdio
    from .agent.stdio._process import serve_stdio as serve_stdio
    from .agent.stdio._server import AcpServer as AcpServer
    from .agent.stdio._server import AgentFactory as AgentFactory
    from .agent.stdio._server import serve as serve
    from .cli._main import load_factory as load_factory
    from .hosting._attachable import Attachable as Attachable
    from .hosting._attachable import attachable as attachable
    from .hosting._serve import host as host
else:  # hidden from type checkers, so a misspelt name is still an error
    # <names> written by scripts/gen_names.py from the block above: edit that, then run it
    _HOME = {
        "AttachServer": "agent.attach._server",
        "run_stdio": "agent.stdio._process",
        "serve_stdio": "agent.stdio._process",
        "AcpServer": "agent.stdio._server",
        "AgentFactory": "agent.stdio._server",
        "serve": "agent.stdio._server",
        "load_factory": "cli._main",
        "Attachable": "hosting._attachable",
        "attachable": "hosting._attachable",
        "host": "hosting._serve",
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
                # Reprs, help() and pickles say agent_channel_acp.host, wherever it lives; but
                # not for a class with annotations: typing.get_type_hints reads them there.
                if value.__module__ == loaded.__name__ and (
                    isinstance(value, FunctionType)
                    or (isinstance(value, type) and "__annotations__" not in vars(value))
                ):
                    value.__module__ = __name__
                here[public] = value  # later lookups find it directly
        return here[name]

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})
