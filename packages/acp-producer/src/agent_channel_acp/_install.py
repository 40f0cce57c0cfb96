"""What to install for a part a command is missing, as a command that works today.

The packages are not on PyPI yet, so each hint is a ``pip install`` of the packages'
folders, run at the root of a clone of the repository, with every workspace package the
named one needs beside it (no index has them). ``tests/test_install_hints.py`` checks these
commands against the pyprojects; on the first upload they become the distributions' names
(docs/release.md).
"""

_ACP = "pip install ./packages/channel-core ./packages/store-sqlite"  # what the producer needs
CONSOLE = f"{_ACP} './packages/acp-producer[console]'"
DEMO = f"{_ACP} ./packages/react-consumer './packages/acp-producer[demo]'"
REMOTE = f"{_ACP} './packages/acp-producer[remote]'"
RAY = "pip install ./packages/channel-core ./packages/ray-runtime"


def hint(command: str) -> str:
    """``command`` and where to run it, for a one-line message."""
    return f"{command} (from the root of a clone of the repository; not on PyPI yet)"
