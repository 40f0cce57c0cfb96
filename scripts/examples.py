"""The runnable examples of the READMEs and docs/examples/, read from where they live.

One place names them, so the documentation site shows, and CI's wheel smoke runs, the
very code a reader copies from PyPI. Stdlib only: CI runs it before any venv exists.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

EXAMPLES = {
    # name: (README, how the block's first line starts), or the path of a whole file
    "core-agent": ("packages/channel-core/README.md", '"""letters.py'),
    "core-runtime": (
        "packages/channel-core/README.md",
        "from agent_channel import Cancel, UserMessage, open_channel",
    ),
    "react-quickstart": (
        "packages/react-consumer/README.md",
        "import anyio\nfrom agent_channel_react import AgentState",
    ),
    "acp-attachable": (
        "packages/acp-producer/README.md",
        "import asyncio\nfrom agent_channel import ChatMessageUser, open_channel",
    ),
    "slow-tools": "docs/examples/slow_tools.py",
    "pydantic-ai-weather": "docs/examples/weather.py",
    "openai-agents-support": "docs/examples/support.py",
    "langgraph-forecast": "docs/examples/forecast.py",
    "ray-quickstart": ("packages/ray-runtime/README.md", "import agent_channel_ray as acr"),
    "sqlite-durable": ("packages/store-sqlite/README.md", '"""durable.py'),
    "postgres-shared": ("packages/store-postgres/README.md", '"""shared.py'),
    "readme-agent": ("README.md", '"""my_agents.py'),  # tests/test_docs_examples.py runs it
}


def python_block(readme: str, start: str) -> str:
    """The one ```python block of ``readme`` (repository-relative) that begins with ``start``."""
    text = (ROOT / readme).read_text(encoding="utf-8")
    blocks = [
        b for b in re.findall(r"```python\n(.*?)```", text, flags=re.S) if b.startswith(start)
    ]
    if len(blocks) != 1:
        raise LookupError(f"{readme}: {len(blocks)} python blocks start with {start!r}, want 1")
    return blocks[0]


def example(name: str) -> str:
    where = EXAMPLES[name]
    if isinstance(where, str):
        return (ROOT / where).read_text(encoding="utf-8")
    return python_block(*where)
