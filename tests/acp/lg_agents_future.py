"""F8: a LangGraph graph as a langgraph release past the adapter's range would report itself
(only the version it reports differs: no other one is installed to try)."""

import langgraph.version

langgraph.version.__version__ = "1.99.0"

from lg_agents import graph  # noqa: E402  (made after the version is set, as it would be)

__all__ = ["graph"]
