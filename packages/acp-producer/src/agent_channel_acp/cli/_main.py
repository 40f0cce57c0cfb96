"""``agent-channel-acp``: serve an agent to an ACP client.

Kept import-light: ``--help``, ``--version`` and argument errors never import
``acp`` (about 0.7 s) or the agent. The agent factory is loaded by dotted
path, so this package never imports a consumer package.

Every failure the user can cause (a bad flag, level, path or value) is one
line on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from .._install import DEMO as INSTALL_DEMO
from .._install import hint
from ._parser import DEMO, DEMO_ORCHESTRATOR, DEMO_TASK, LOG_ENV, MODEL_ENV, build_parser, fail

if TYPE_CHECKING:
    from .. import AgentFactory
    from ..hosting._asgi import WsOptions

SERVER_ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL")
"""A real model's variables: set alone, the demo says how to use one (it stays scripted)."""
DEMO_HINT = f"; install the demo: {hint(INSTALL_DEMO)}"


def load_factory(spec: str) -> AgentFactory:
    """The agent factory ``spec`` names (``module:attr``): a factory as it is, or a
    framework's agent object (a ``pydantic_ai.Agent``) made one by its installed adapter
    (``agent_channel.lowlevel.as_factory``); the object's errors as
    :func:`agent_channel.load_spec`'s."""
    from agent_channel.lowlevel import as_factory, load_agent

    return as_factory(load_agent(spec), spec)  # what it returns is checked as it runs


def _agent_and_log(
    args: argparse.Namespace, command: str, demo: str
) -> tuple[str, AgentFactory, Callable[[float], None]]:
    """What ``stdio`` and ``serve`` share before they run: the agent's spec and factory (one
    line and exit 2 if neither ``--agent`` nor ``--demo``), then logging started."""
    if not (args.agent or args.demo):
        fail(
            f"{command}: one of --agent MODULE:FACTORY or --demo is required "
            f"(see agent-channel-acp {command} --help)",
            2,
        )
    level = args.log_level if args.log_level is not None else _env_log_level()
    spec = args.agent
    if args.demo:
        spec = DEMO_ORCHESTRATOR if args.demo == "orchestrator" else demo
    factory = _load_or_fail(spec, demo=bool(args.demo))
    if args.demo:
        _scripted_hint(command, args.model)
    from ._logging import start_logging

    return spec, factory, start_logging(level, sys.stderr)


def _scripted_hint(command: str, model: str | None) -> None:
    """The demo runs its scripted model unless a model is named. Where the environment
    looks set up for a real one (a key or URL, as many shells have), say how to use it."""
    if model or os.environ.get(MODEL_ENV):
        return
    found = next((k for k in SERVER_ENV if os.environ.get(k)), None)
    if found:
        sys.stderr.write(
            f"agent-channel-acp: {command}: {found} is set, but no model is named: the demo "
            f"runs its scripted model (for a real one: --model NAME, or {MODEL_ENV}=NAME)\n"
        )


def _load_or_fail(spec: str, *, demo: bool) -> AgentFactory:
    """:func:`load_factory`, or exit with one line saying what is wrong and where."""
    from agent_channel.lowlevel import NotAnAgent  # here: the shell verbs never need the core

    try:
        return load_factory(spec)
    except ModuleNotFoundError as e:
        hint = DEMO_HINT if demo and (e.name or "").startswith("agent_channel_react") else ""
        fail(f"cannot import {spec}: {e}{hint or _path_hint(spec, e)}")
    except NotAnAgent as e:
        fail(f"cannot serve {spec}: {e}")
    except Exception as e:
        fail(f"cannot load {spec}: {_describe(e)}")


def _path_hint(spec: str, e: ModuleNotFoundError) -> str:
    """Why a module sitting in the current directory is not found, and the fix: the
    installed command (unlike ``python -m``) does not put the directory on the path."""
    top = spec.partition(":")[0].partition(".")[0]
    here = Path.cwd()
    if e.name != top or not ((here / f"{top}.py").is_file() or (here / top).is_dir()):
        return ""
    if any(Path(p or ".").resolve() == here.resolve() for p in sys.path):
        return ""
    return (
        f" ({top} is in the current directory, which is not on the module path: "
        "run with PYTHONPATH=.)"
    )


def _describe(e: BaseException) -> str:
    """An exception in one line: this module's own errors as they are, others with their place."""
    if isinstance(e, SyntaxError) and e.filename:
        return f"{type(e).__name__}: {e.msg} ({e.filename}:{e.lineno})"
    frames = traceback.extract_tb(e.__traceback__)
    if not frames or frames[-1].filename == __file__:
        return str(e)
    place = frames[-1]
    return f"{type(e).__name__}: {e} ({place.filename}:{place.lineno})"


def _env_log_level() -> int:
    from ._logging import parse_level

    text = os.environ.get(LOG_ENV) or "WARNING"
    try:
        return parse_level(text)
    except ValueError as e:
        fail(f"{LOG_ENV}: {e}", 2)


def main(argv: Sequence[str] | None = None) -> None:
    try:
        _main(argv)
    except KeyboardInterrupt:  # Ctrl-C before serving started (a slow import, say)
        os._exit(130)


_VERBS = frozenset(
    {"ls", "messages", "send", "cancel", "cancel-tool", "queue", "end", "bridge", "answer", "web"}
)


def _use_server(args: argparse.Namespace) -> None:
    """``--server URL``: every client of this process reaches that server alone."""
    from ..operator._connect import CtlError, remote_record
    from ..wire._discovery import use_remote

    try:
        use_remote(remote_record(args.server, args.token_file, args.cafile))
    except CtlError as e:
        fail(f"{args.command}: {e}", 2)


def _main(argv: Sequence[str] | None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "server", None) and args.command != "serve":
        _use_server(args)
    if args.command in _VERBS:
        sys.exit(_verb(args))
    if args.command == "serve":
        _serve(args)
    if args.command == "demo":
        _env_log_level()  # the agent it starts reads it: fail here, in one line
        _load_or_fail(DEMO, demo=True)
        if args.stdio or args.json:
            if args.orchestrator:
                fail("demo: --orchestrator is for the console and --script, not the stdio tour", 2)
            if args.model:
                fail("demo: --model is for the console and --script, not the stdio tour", 2)
            from ..operator._tour import run_tour

            sys.exit(run_tour(as_json=args.json, tool_seconds=args.tool_seconds))
        from ..operator.console import demo_main

        _scripted_hint("demo", args.model)
        # named for the server it starts, which so says nothing more about it
        model = args.model or os.environ.get(MODEL_ENV) or "scripted"
        sys.exit(
            demo_main(
                script=args.script,
                tool_seconds=args.tool_seconds,
                model=model,
                orchestrator=args.orchestrator,
            )
        )
    if args.command == "attach":
        from ..operator.console import attach_main

        sys.exit(attach_main(args.target, observe=args.observe))
    stderr = sys.stderr
    _, factory, stop_logging = _agent_and_log(args, "stdio", DEMO)
    # sys.stderr is the log's queue from here
    from ..agent.stdio._process import run_stdio
    from ..agent.stdio._server import AcpServer

    store = None
    if args.store:
        from agent_channel import StoreError, open_store

        try:
            store = open_store(None if args.store is True else args.store)
        except StoreError as e:
            stop_logging(0.5)
            sys.stderr = stderr
            fail(f"stdio: {e}")
    server = AcpServer(
        factory,
        model=args.model,
        approve=args.approve,
        context_window=args.context_window,
        store=store,
        restore=args.restore,
    )
    code = run_stdio(server)
    stop_logging(0.5)
    sys.stderr.flush()
    os._exit(code)  # do not wait for worker threads of abandoned tools


def _verb(args: argparse.Namespace) -> int:
    """Run a shell verb (``operator/_verbs``) or the bridge; the exit status."""
    from ..operator import _verbs as ctl

    out = sys.stdout
    as_json = getattr(args, "json", False)
    target = getattr(args, "target", None)
    if args.command == "bridge":
        from ..operator._bridge import bridge

        return ctl.run_verb(lambda: bridge(target))
    if args.command == "web":
        from ..operator._web import web

        async def page() -> int:
            return web(out, open_browser=args.open, as_json=as_json)

        return ctl.run_verb(page)
    verbs: dict[str, Callable[[], Coroutine[object, object, int]]] = {
        "ls": lambda: ctl.ls(out, as_json=as_json),
        "messages": lambda: ctl.messages(
            out,
            target,
            tail=args.tail,
            all_=args.all,
            full=args.full,
            child=args.child,
            as_json=as_json,
        ),
        "send": lambda: (
            ctl.steer_child(out, args.target, args.child, args.text, as_json=as_json)
            if args.child
            else ctl.send(out, args.target, args.text, as_json=as_json)
        ),
        "cancel": lambda: (
            ctl.stop_child(out, args.target, args.child, as_json=as_json)
            if args.child
            else ctl.cancel(out, args.target, as_json=as_json)
        ),
        "cancel-tool": lambda: ctl.cancel_tool(
            out, args.target, args.tool_call_id, as_json=as_json
        ),
        "answer": lambda: ctl.answer(out, args.target, args.text, as_json=as_json),
        "queue": lambda: ctl.queue(out, args.target, withdraw=args.withdraw, as_json=as_json),
        "end": lambda: ctl.end(out, args.target, reason=args.reason, as_json=as_json),
    }
    return ctl.run_verb(verbs[args.command])


def _ws_options(args: argparse.Namespace) -> WsOptions | None:
    if args.ws is None:
        for flag in ("tls_cert", "tls_key", "token_file"):
            if getattr(args, flag):
                fail(f"serve: --{flag.replace('_', '-')} is for --ws", 2)
        return None
    from ..hosting._asgi import WsOptions

    return WsOptions(
        args.ws,
        host=args.ws_host,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        token_file=args.token_file,
    )


def _serve(args: argparse.Namespace) -> NoReturn:
    if args.ray is not None:
        _serve_ray(args)
    stderr = sys.stderr
    spec, factory, stop_logging = _agent_and_log(args, "serve", DEMO_TASK)
    # sys.stderr is the log's queue from here
    from ..hosting._serve import ServeError, serve_command

    try:
        code = serve_command(
            factory,
            spec=spec,
            model=args.model,
            task=args.input,
            socket_path=args.socket,
            port=args.port,
            count=args.count if args.count is not None else 1,
            replay=args.replay,
            approve=args.approve,
            context_window=args.context_window,
            as_json=args.json,
            store=args.store,
            restore=args.restore,
            load=load_factory,
            ws=_ws_options(args),
        )
    except ServeError as e:
        stop_logging(0.5)
        sys.stderr = stderr
        fail(f"serve: {e}")
    stop_logging(0.5)
    sys.stderr.flush()
    os._exit(code)  # do not wait for worker threads of abandoned tools


def _serve_ray(args: argparse.Namespace) -> NoReturn:
    """``serve --ray``: the cluster's executions, not ours to start or end (``--approve``
    routes their approvals to the clients, as for agents run here)."""
    for flag in ("agent", "demo", "count", "store", "input"):
        if getattr(args, flag) is not None:
            name = "--" + flag
            fail(f"serve: --ray serves the cluster's executions: {name} is for agents run here", 2)
    level = args.log_level if args.log_level is not None else _env_log_level()
    from ..hosting._ray import load_ray, serve_ray_command
    from ..hosting._serve import ServeError
    from ._logging import start_logging

    try:
        hosted = load_ray().hosted
    except ServeError as e:
        fail(str(e), 2)
    stderr = sys.stderr
    stop_logging = start_logging(level, sys.stderr)
    try:
        code = serve_ray_command(
            args.ray,
            hosted,
            socket_path=args.socket,
            port=args.port,
            replay=args.replay,
            approve=args.approve,
            context_window=args.context_window,
            as_json=args.json,
            ws=_ws_options(args),
        )
    except ServeError as e:
        stop_logging(0.5)
        sys.stderr = stderr
        fail(f"serve: {e}", 2)
    stop_logging(0.5)
    sys.stderr.flush()
    os._exit(code)  # do not wait for Ray's threads
