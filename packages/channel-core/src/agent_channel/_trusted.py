"""Models the core builds from its own values, without validating them again.

A supervisor builds a registry row (:class:`ChildInfo`), an :class:`Announce` and a child
event from values it made and typed itself, several times per child. Validation checks
nothing new there and costs ~3-5 µs a model (``model_construct`` more still: it walks
the fields for defaults and aliases); on a child's end that is most of the time between
the kill and its report. So these are set field by field, as ``model_construct`` sets
them, every field given.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)

_set = object.__setattr__


def trusted(cls: type[M], fields: dict[str, Any]) -> M:
    """``cls`` holding ``fields`` as they are: every field, each of its declared type.

    For values the core built itself only; anything from outside goes through validation.
    ``tests/test_trusted.py`` checks each use against the validated model.
    """
    model = object.__new__(cls)
    _set(model, "__dict__", fields)
    _set(model, "__pydantic_fields_set__", set(fields))
    _set(model, "__pydantic_extra__", None)
    _set(model, "__pydantic_private__", None)
    return model
