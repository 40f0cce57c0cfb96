"""F8: an Agents SDK agent as an SDK release past the adapter's range would report itself
(only the version it reports differs: no other one is installed to try)."""

import oai_agents

oai_agents.sdk.__version__ = "0.99.0"

agent = oai_agents.agent

__all__ = ["agent"]
