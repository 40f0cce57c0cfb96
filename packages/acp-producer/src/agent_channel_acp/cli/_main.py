"""``agent-channel-acp``: serve an agent to an ACP client.

Kept import-light: ``--help``, ``--version`` and argument errors never import
``acp`` (about 0.7 s) or the agent. The agent factory is loaded by dotted
path, so this package never imports a consumer package.

Every failure the user can cause (a bad flag, level, path or value) is one
line on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
import sys
import traceback
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, cast

from .._version import __version__

if TYPE_CHECKING:
    from .. import AgentFactory

AddParser = Callable[..., argparse.ArgumentParser]
"""``add_subparsers().add_parser``: how a command's parser is made."""

DEMO = "agent_channel_react.demo:demo"
DEMO_TASK = "agent_channel_react.demo:task_demo"
LOG_ENV = "AGENT_CHANNEL_ACP_LOG"
MODEL_ENV = "AGENT_CHANNEL_MODEL"
_SERVER_ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL")
_DEMO_HINT = " (install the demo: pip install 'agent-channel-acp[demo]')"

_DESCRIPTION = """\
Serve an agent-channel agent over the Agent Client Protocol (ACP).

stdio: an ACP client (Zed, JetBrains, any ACP client) launches this command and
talks JSON-RPC on its stdin/stdout. Every session/new starts one agent
execution; prompts are posted to it, a cancel interrupts it, and what it does
streams back as session/update notifications. Logs go to stderr only.

serve: agents run on their own and operators attach to them: from an editor
through `bridge`, or from a shell with ls, messages, send, cancel, cancel-tool,
queue and end.
"""

_STDIO_EPILOG = """\
examples:
  agent-channel-acp stdio --demo
      the demo ReAct agent (scripted model; needs agent-channel-acp[demo]).
      With a model named (--model, or AGENT_CHANNEL_MODEL) it uses that model on
      an OpenAI-compatible server (OPENAI_BASE_URL / OPENAI_API_KEY) instead.
  agent-channel-acp stdio --agent mypkg.agents:factory --model gpt-4o-mini --approve
      your own agent: `factory(model)` returns the async execution body.

environment:
  AGENT_CHANNEL_ACP_LOG   log level on stderr (default WARNING)
"""


def fail(message: str, code: int = 1) -> NoReturn:
    """Exit with one line on stderr."""
    sys.stderr.write(f"agent-channel-acp: {message}\n")
    sys.exit(code)


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line (argparse prints the whole usage first)."""

    def error(self, message: str) -> NoReturn:
        command = self.prog.removeprefix("agent-channel-acp").strip()
        fail(f"{command + ': ' if command else ''}{message} (see {self.prog} --help)", 2)


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, not {text!r}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {text!r}")
    return value


def _log_level(text: str) -> int:
    from ._logging import parse_level

    try:
        return parse_level(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="agent-channel-acp",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"agent-channel-acp {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    stdio = sub.add_parser(
        "stdio",
        help="serve one ACP client on stdin/stdout (the client launches this process)",
        description="Serve one ACP client on stdin/stdout.",
        epilog=_STDIO_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_agent_options(
        stdio,
        agent="agent factory by dotted path: factory(model) -> async body (required, or --demo)",
        demo=f"serve the demo agent ({DEMO})",
        approve="ask the client (session/request_permission) before every tool call",
    )
    demo = sub.add_parser(
        "demo",
        help="see an operator drive a running demo agent (the console, or a transcript)",
        description=(
            "Start `agent-channel-acp serve --demo` and open the console on it. With --script, "
            "or when stdout is not a terminal, play an operator through a real ACP client "
            "instead (send, cancel one tool, interrupt mid-tool, redirect, queue and withdraw "
            "a message, let it finish) and print a transcript; exit 0 if every step behaved as "
            "described. --stdio plays the older tour over stdio, as an editor would."
        ),
    )
    demo.add_argument(
        "--script", action="store_true", help="play the operator script, print a transcript"
    )
    demo.add_argument(
        "--stdio", action="store_true", help="the stdio tour (`stdio --demo`, as an editor)"
    )
    demo.add_argument("--json", action="store_true", help="the stdio tour as JSON lines")
    demo.add_argument(
        "--model",
        metavar="NAME",
        help="an OpenAI-compatible model (its server: OPENAI_BASE_URL / OPENAI_API_KEY, "
        f"as for stdio and serve); default: ${MODEL_ENV}, else the scripted model",
    )
    demo.add_argument(
        "--tool-seconds",
        type=_positive_seconds,
        default=1.5,
        metavar="S",
        help="how long each demo tool takes, a positive number (default: %(default)s)",
    )
    attach = sub.add_parser(
        "attach",
        help="the operator console on a running execution (needs agent-channel-acp[console])",
        description="Open the operator console on a running execution (a picker if several).",
    )
    attach.add_argument(
        "target", metavar="TARGET", nargs="?", help="an execution id or a unique prefix of one"
    )
    attach.add_argument(
        "--observe", action="store_true", help="watch only: never drive, stop or answer"
    )
    _add_serve(sub.add_parser)
    _add_verbs(sub.add_parser)
    return parser


_SERVE_EPILOG = """\
examples:
  agent-channel-acp serve --demo --count 3
      three demo agents working a built-in task; then attach:
      agent-channel-acp ls, agent-channel-acp send <id> "hello", or an editor
      through agent-channel-acp bridge.
  agent-channel-acp serve --agent mypkg.agents:factory --input "Fix the tests"

The server listens on a unix socket (0600) in the per-user runtime directory
($AGENT_CHANNEL_RUNTIME_DIR, else $XDG_RUNTIME_DIR/agent-channel, else
<tmp>/agent-channel-<uid>, mode 0700) and writes its discovery record there.
Ctrl-C or SIGTERM ends the executions and removes the record and the socket.
"""


def _add_agent_options(
    parser: argparse.ArgumentParser, *, agent: str, demo: str, approve: str
) -> None:
    """What ``stdio`` and ``serve`` share: which agent, its model, approval, context, logs."""
    # Not required=True: argparse would report a missing --agent before an unknown flag.
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--agent", metavar="MODULE:FACTORY", help=agent)
    which.add_argument("--demo", action="store_true", help=demo)
    parser.add_argument("--model", metavar="NAME", help="model name passed to the factory")
    parser.add_argument("--approve", action="store_true", help=approve)
    parser.add_argument(
        "--context-window",
        type=_positive_int,
        metavar="TOKENS",
        help="the model's context size; enables usage_update notifications",
    )
    parser.add_argument(
        "--log-level",
        type=_log_level,
        metavar="LEVEL",
        help=f"stderr log level: DEBUG, INFO, WARNING, ERROR or CRITICAL "
        f"(default: ${LOG_ENV}, else WARNING)",
    )


def _add_serve(add_parser: AddParser) -> None:
    serve = add_parser(
        "serve",
        help="run agents on their own and let operators attach to them",
        description="Run executions of an agent and serve them to attaching ACP clients.",
        epilog=_SERVE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_agent_options(
        serve,
        agent="agent factory by dotted path: factory(model) -> async body (required, or --demo)",
        demo=f"the demo agent on a built-in task ({DEMO_TASK})",
        approve="ask an attached driver (session/request_permission) before every tool call",
    )
    serve.add_argument("--input", metavar="TEXT", help="the task, posted to each execution first")
    where = serve.add_mutually_exclusive_group()
    where.add_argument(
        "--socket", metavar="PATH", help="unix socket path (default: in the runtime dir)"
    )
    where.add_argument(
        "--port",
        type=_port,
        metavar="N",
        help="listen on TCP 127.0.0.1:N instead (0: any free port); clients need the token "
        "from the discovery record",
    )
    serve.add_argument(
        "--count", type=_positive_int, default=1, metavar="N", help="executions to run (default: 1)"
    )
    serve.add_argument(
        "--replay",
        type=_count,
        default=100,
        metavar="N",
        help="events replayed to a client that attaches (default: %(default)s)",
    )
    serve.add_argument("--json", action="store_true", help="announce where it listens as JSON")


def _add_verbs(add_parser: AddParser) -> None:
    target_help = "execution id, a unique prefix of one, or omitted when only one is served"

    def verb(name: str, help: str, target: str = "required") -> argparse.ArgumentParser:
        p = add_parser(name, help=help, description=help[0].upper() + help[1:] + ".")
        if target == "required":
            p.add_argument("target", metavar="TARGET", help=target_help.split(", or")[0])
        elif target == "optional":
            p.add_argument("target", metavar="TARGET", nargs="?", help=target_help)
        if name != "bridge":
            p.add_argument("--json", action="store_true", help="JSON output, for programs")
        return p

    verb("ls", "list the running servers and their executions", target="none")
    messages = verb("messages", "print an execution's conversation", target="optional")
    amount = messages.add_mutually_exclusive_group()
    amount.add_argument(
        "--tail", type=_positive_int, metavar="N", help="the last N messages (default: 20)"
    )
    amount.add_argument("--all", action="store_true", help="every message")
    messages.add_argument("--full", action="store_true", help="messages raw, not summarised")
    send = verb("send", "send a message to an execution (read at its next step)")
    send.add_argument("text", metavar="TEXT", help="the message")
    verb("cancel", "interrupt an execution's turn (as session/cancel does)")
    tool = verb("cancel-tool", "cancel one running tool call; the turn goes on")
    tool.add_argument("tool_call_id", metavar="TOOL_CALL_ID")
    queue = verb("queue", "show the operator messages the agent has not read yet")
    queue.add_argument("--withdraw", metavar="ID", help="withdraw this queued message instead")
    end = verb("end", "end an execution (not an interrupt: its loop stops)")
    end.add_argument("--reason", metavar="TEXT", help="why, shown to attached clients")
    verb("bridge", "relay stdio to a running agent (launch this from Zed)", target="optional")


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or a positive integer, not {text!r}")
    return value


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port number 0-65535, not {text!r}")
    return value


def load_factory(spec: str) -> AgentFactory:
    """Import ``module:attr`` (attr may be dotted) and check it is callable."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"expected MODULE:FACTORY, got {spec!r}")
    obj: object = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise TypeError(f"{spec} is not callable")
    return cast("AgentFactory", obj)  # what it returns is checked as it runs


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
    spec = demo if args.demo else args.agent
    factory = _load_or_fail(spec, demo=args.demo)
    if args.demo:
        _scripted_hint(command, args.model)
    from ._logging import start_logging

    return spec, factory, start_logging(level, sys.stderr)


def _scripted_hint(command: str, model: str | None) -> None:
    """The demo runs its scripted model unless a model is named. Where the environment
    looks set up for a real one (a key or URL, as many shells have), say how to use it."""
    if model or os.environ.get(MODEL_ENV):
        return
    found = next((k for k in _SERVER_ENV if os.environ.get(k)), None)
    if found:
        sys.stderr.write(
            f"agent-channel-acp: {command}: {found} is set, but no model is named: the demo "
            f"runs its scripted model (for a real one: --model NAME, or {MODEL_ENV}=NAME)\n"
        )


def _load_or_fail(spec: str, *, demo: bool) -> AgentFactory:
    """:func:`load_factory`, or exit with one line saying what is wrong and where."""
    try:
        return load_factory(spec)
    except ModuleNotFoundError as e:
        hint = _DEMO_HINT if demo and (e.name or "").startswith("agent_channel_react") else ""
        fail(f"cannot import {spec}: {e}{hint or _path_hint(spec, e)}")
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


_VERBS = frozenset({"ls", "messages", "send", "cancel", "cancel-tool", "queue", "end", "bridge"})


def _main(argv: Sequence[str] | None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command in _VERBS:
        sys.exit(_verb(args))
    if args.command == "serve":
        _serve(args)
    if args.command == "demo":
        _env_log_level()  # the agent it starts reads it: fail here, in one line
        _load_or_fail(DEMO, demo=True)
        if args.stdio or args.json:
            if args.model:
                fail("demo: --model is for the console and --script, not the stdio tour", 2)
            from ..operator._tour import run_tour

            sys.exit(run_tour(as_json=args.json, tool_seconds=args.tool_seconds))
        from ..operator.console import demo_main

        _scripted_hint("demo", args.model)
        # named for the server it starts, which so says nothing more about it
        model = args.model or os.environ.get(MODEL_ENV) or "scripted"
        sys.exit(demo_main(script=args.script, tool_seconds=args.tool_seconds, model=model))
    if args.command == "attach":
        from ..operator.console import attach_main

        sys.exit(attach_main(args.target, observe=args.observe))
    _, factory, stop_logging = _agent_and_log(args, "stdio", DEMO)
    from ..agent.stdio._process import run_stdio
    from ..agent.stdio._server import AcpServer

    server = AcpServer(
        factory, model=args.model, approve=args.approve, context_window=args.context_window
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
    verbs: dict[str, Callable[[], Coroutine[object, object, int]]] = {
        "ls": lambda: ctl.ls(out, as_json=as_json),
        "messages": lambda: ctl.messages(
            out, target, tail=args.tail, all_=args.all, full=args.full, as_json=as_json
        ),
        "send": lambda: ctl.send(out, args.target, args.text, as_json=as_json),
        "cancel": lambda: ctl.cancel(out, args.target, as_json=as_json),
        "cancel-tool": lambda: ctl.cancel_tool(
            out, args.target, args.tool_call_id, as_json=as_json
        ),
        "queue": lambda: ctl.queue(out, args.target, withdraw=args.withdraw, as_json=as_json),
        "end": lambda: ctl.end(out, args.target, reason=args.reason, as_json=as_json),
    }
    return ctl.run_verb(verbs[args.command])


def _serve(args: argparse.Namespace) -> NoReturn:
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
            count=args.count,
            replay=args.replay,
            approve=args.approve,
            context_window=args.context_window,
            as_json=args.json,
        )
    except ServeError as e:
        stop_logging(0.5)
        sys.stderr = stderr
        fail(f"serve: {e}")
    stop_logging(0.5)
    sys.stderr.flush()
    os._exit(code)  # do not wait for worker threads of abandoned tools
