"""Name an object by ``module:attr``: how agents, bodies and factories cross a process edge.

Composition happens at the edge (a command line, a Ray worker), where only a string can
travel; every package that takes such a string resolves it here, with the same rules and
the same errors.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def load_spec(spec: str) -> Callable[..., Any]:
    """The callable ``spec`` names: ``module:attr``, ``attr`` dotted for a nested name.

    ``ValueError`` for a spec of another shape, ``TypeError`` for a name that is not
    callable; the import's own error (``ModuleNotFoundError``, ``AttributeError``) as it is,
    so a caller can say which part was wrong.
    """
    module, sep, attr = spec.partition(":")
    if not sep or not module or not attr:
        raise ValueError(f"expected 'module:attr', got {spec!r}")
    found: object = importlib.import_module(module)
    for part in attr.split("."):
        found = getattr(found, part)
    if not callable(found):
        raise TypeError(f"{spec} is not callable")
    return found
