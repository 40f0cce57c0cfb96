"""The seam: what runtimes, stores and extensions build on, beyond the public API.

An agent author never needs this module. What lives here is stable and documented as
the public API is, but it exposes how an execution works inside: what is built on the
channel (children, questions, a store, a framework's adapter) uses these names, and
reaches nothing private of the core.
"""

from __future__ import annotations

from ._codec import items as decode_items
from ._codec import messages as decode_messages

__all__ = ["decode_items", "decode_messages"]
