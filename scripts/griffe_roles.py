"""Griffe extension: Sphinx cross-reference roles in docstrings read as code on the site.

The docstrings are written for ``help()`` and editors, and some name objects the
Sphinx way (``:class:`~agent_channel.AgentRef```). Markdown would show the role
literally; this shows the name as code instead (the last dotted part when the target
starts with ``~``, as Sphinx does). Signatures carry the real cross-links.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(?:class|meth|func|attr|exc|mod|obj|data|const):`(~?)([^`]+)`")


def _as_code(match: re.Match[str]) -> str:
    short, target = match.groups()
    return f"`{target.rsplit('.', 1)[-1] if short else target}`"


def plain(text: str) -> str:
    return _ROLE.sub(_as_code, text)


class SphinxRolesAsCode(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = plain(obj.docstring.value)
