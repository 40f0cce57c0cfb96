"""What an attach server on another host needs of a cluster: its running executions.

``agent-channel-acp serve --ray`` loads this module by name (the producer never imports
Ray) and asks :func:`hosted` again every second, serving each new execution it lists.
"""

from __future__ import annotations

from typing import NamedTuple

from ._cluster import connect, executions, ref_for
from ._ref import RayRef


class Hosted(NamedTuple):
    """One running top-level execution of the cluster, and a ref that drives it."""

    execution_id: str
    title: str
    ref: RayRef


def hosted(address: str = "auto") -> list[Hosted]:
    """Join the cluster at ``address`` (once per process), then its running top-level
    executions, oldest first; children are served through their parent's ref."""
    connect(address)
    found: list[Hosted] = []
    for record in executions():
        if record.status != "running" or record.parent is not None:
            continue
        try:
            ref = ref_for(record.execution_id)
        except LookupError:  # forgotten between the two calls
            continue
        found.append(Hosted(record.execution_id, record.title, ref))
    return found
