"""The operator console: ``agent-channel-acp attach`` (Textual, the ``console`` extra).

:mod:`._state` folds the attach wire into what is shown, :mod:`._link` is the ACP
client that keeps it fed (and reconnects), :mod:`._app` draws it. The first two need no
terminal library: the demo's operator script (``_script``) and the tests use them too.
"""

from __future__ import annotations

import sys

from ..._install import CONSOLE, hint

INSTALL_HINT = f"the console needs Textual: {hint(CONSOLE)}"


def _have_textual() -> bool:
    try:
        import textual  # noqa: F401  # pyright: ignore[reportUnusedImport]
    except ImportError:
        return False
    return True


def attach_main(target: str | None, *, observe: bool = False) -> int:
    """``agent-channel-acp attach [--observe] [TARGET]``: the console, or one line saying how
    to get it."""
    if not _have_textual():
        sys.stderr.write(f"agent-channel-acp: attach: {INSTALL_HINT}\n")
        return 1
    import asyncio

    from ._app import run_console
    from ._link import Link, LinkError
    from ._state import State

    try:
        asyncio.run(Link(State(), target=target).probe())
    except LinkError as e:
        sys.stderr.write(f"agent-channel-acp: attach: {e}\n")
        return 1
    return run_console(target, observe=observe)


def demo_main(
    *,
    script: bool,
    tool_seconds: float | None,
    model: str | None = None,
    orchestrator: bool = False,
) -> int:
    """``agent-channel-acp demo``: ``serve --demo`` with the console on it in a terminal;
    the operator script (a transcript, exit 0) with ``--script`` or when stdout is no
    terminal, or when Textual is missing (said in one line)."""
    from .._script import run_script

    if script or not (sys.stdout.isatty() and sys.stdin.isatty()):
        return run_script(tool_seconds=tool_seconds, model=model, orchestrator=orchestrator)
    if not _have_textual():
        sys.stderr.write(f"agent-channel-acp: demo: {INSTALL_HINT}; playing the script instead\n")
        return run_script(tool_seconds=tool_seconds, model=model, orchestrator=orchestrator)
    from .._script import ScriptFailed, start_server, stop_server
    from ._app import Console

    try:
        proc, pid = start_server(tool_seconds, model, quiet=True, orchestrator=orchestrator)
    except ScriptFailed as e:
        sys.stderr.write(f"agent-channel-acp: demo: {e}\n")
        return 1
    app = Console(pid=pid)
    try:
        app.run()
    finally:
        stop_server(proc)
    return app.exit_status("demo")
