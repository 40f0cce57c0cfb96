"""agent_channel_ray: agent-channel executions on a Ray cluster.

Each execution runs in an :class:`ExecutionHost` async actor that opens its channel and runs
its body; a :class:`RayRef` drives it from any host or thread with the methods, types and
errors of a local :class:`~agent_channel.AgentRef`. A named registry actor lists the
cluster's executions, and reports one whose actor died as ended, with the reason.
"""

# The public names are listed once, in the block below; at run time each loads its module
# (and so ``ray``) when first asked for (scripts/gen_names.py writes the table).

from __future__ import annotations

import importlib
from types import FunctionType
from typing import TYPE_CHECKING

from ._version import __version__ as __version__

if TYPE_CHECKING:
    from ._cluster import connect as connect
    from ._cluster import executions as executions
    from ._cluster import ref_for as ref_for
    from ._cluster import start_cluster as start_cluster
    from ._host import ExecutionHostActor as ExecutionHostActor
    from ._launch import ExecutionHost as ExecutionHost
    from ._launch import launch as launch
    from ._ref import HostRestarted as HostRestarted
    from ._ref import RayChildren as RayChildren
    from ._ref import RayRef as RayRef
    from ._registry import registry as registry
    from ._serve import Hosted as Hosted
    from ._serve import hosted as hosted
    from ._wire import Record as Record
else:  # hidden from type checkers, so a misspelt name is still an error
    # <names> written by scripts/gen_names.py from the block above: edit that, then run it
    _HOME = {
        "connect": "_cluster",
        "executions": "_cluster",
        "ref_for": "_cluster",
        "start_cluster": "_cluster",
        "ExecutionHostActor": "_host",
        "ExecutionHost": "_launch",
        "launch": "_launch",
        "HostRestarted": "_ref",
        "RayChildren": "_ref",
        "RayRef": "_ref",
        "registry": "_registry",
        "Hosted": "_serve",
        "hosted": "_serve",
        "Record": "_wire",
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
