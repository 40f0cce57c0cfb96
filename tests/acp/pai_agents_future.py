"""F8: a pydantic-ai agent as a pydantic-ai release past the adapter's range would report
itself (only the version it reports differs: no other one is installed to try)."""

import pydantic_ai

pydantic_ai.__version__ = "2.99.0"

from pai_agents import agent  # noqa: E402  (made after the version is set, as it would be)

__all__ = ["agent"]
