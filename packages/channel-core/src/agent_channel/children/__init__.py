"""Children: an execution spawns, steers, kills and waits for child executions.

Built on the public names of ``agent_channel`` and its seam (``agent_channel.lowlevel``)
alone, so it could move to a distribution of its own by moving these files.
"""

from ._control import SECTION, ChildControl, agent_supervisor, open_supervisor
from ._records import ChildApprover, ChildBody, ChildLimits, ChildToolCall, Steering, SteerOutcome
from ._supervisor import MAX_DEPTH, MAX_RUNNING, MAX_TOTAL, Supervisor

__all__ = [
    "MAX_DEPTH",
    "MAX_RUNNING",
    "MAX_TOTAL",
    "SECTION",
    "ChildApprover",
    "ChildBody",
    "ChildControl",
    "ChildLimits",
    "ChildToolCall",
    "SteerOutcome",
    "Steering",
    "Supervisor",
    "agent_supervisor",
    "open_supervisor",
]
