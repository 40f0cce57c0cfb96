"""agent_channel_acp: drive an agent-channel agent from any ACP client.

The producer binds each ACP session to the :class:`~agent_channel.AgentRef` of
one top-level execution it starts itself. Importing this package is cheap;
the ACP SDK is imported when a server is first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._version import __version__

if TYPE_CHECKING:
    from ._attach import AttachServer
    from ._attachable import Attachable, attachable
    from ._cli import load_factory
    from ._serve import host
    from ._server import AcpServer, AgentFactory, serve
    from ._stdio import run_stdio, serve_stdio

__all__ = [
    "AcpServer",
    "AgentFactory",
    "AttachServer",
    "Attachable",
    "__version__",
    "attachable",
    "host",
    "load_factory",
    "run_stdio",
    "serve",
    "serve_stdio",
]

_LAZY = {
    "AcpServer": "._server",
    "AttachServer": "._attach",
    "Attachable": "._attachable",
    "attachable": "._attachable",
    "host": "._serve",
    "AgentFactory": "._server",
    "serve": "._server",
    "serve_stdio": "._stdio",
    "run_stdio": "._stdio",
    "load_factory": "._cli",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(module, __name__), name)
