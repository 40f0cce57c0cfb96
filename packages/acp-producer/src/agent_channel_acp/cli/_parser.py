"""The command line's parsers: every command, option and help text, and its one-line errors.

Import-light on purpose: ``--help`` and argument errors load neither ``acp`` nor an agent.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from typing import NoReturn

from .._version import __version__

AddParser = Callable[..., argparse.ArgumentParser]
"""``add_subparsers().add_parser``: how a command's parser is made."""

DEMO = "agent_channel_react.demo:demo"
DEMO_TASK = "agent_channel_react.demo:task_demo"
DEMO_ORCHESTRATOR = "agent_channel_react.demo:orchestrator"
LOG_ENV = "AGENT_CHANNEL_ACP_LOG"
MODEL_ENV = "AGENT_CHANNEL_MODEL"

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
        "--orchestrator",
        action="store_true",
        help="`serve --demo orchestrator` instead: the console's tree of its children (piped: "
        "their lives as a transcript)",
    )
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
    add_remote(attach)
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
    which.add_argument(
        "--demo",
        nargs="?",
        const=True,
        choices=["orchestrator"],
        metavar="orchestrator",
        help=f"{demo}; --demo orchestrator: an agent that spawns, steers and stops children "
        f"({DEMO_ORCHESTRATOR})",
    )
    parser.add_argument("--model", metavar="NAME", help="model name passed to the factory")
    parser.add_argument("--approve", action="store_true", help=approve)
    parser.add_argument(
        "--context-window",
        type=_positive_int,
        metavar="TOKENS",
        help="the model's context size; enables usage_update notifications",
    )
    parser.add_argument(
        "--store",
        nargs="?",
        const=True,
        metavar="PATH",
        help="keep executions in this SQLite file so they survive a restart (alone: "
        "$XDG_STATE_HOME/agent-channel/store.db)",
    )
    parser.add_argument(
        "--restore",
        choices=["go", "wait"],
        default="go",
        help="what a restored execution does: go on where it was (default), or wait for an "
        "operator's message",
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
        "--count", type=_positive_int, metavar="N", help="executions to run (default: 1)"
    )
    serve.add_argument(
        "--ray",
        nargs="?",
        const="auto",
        metavar="ADDRESS",
        help="serve the running executions of the Ray cluster at ADDRESS (alone: auto, the "
        "one `ray start` began here) instead of running agents; needs agent-channel-ray",
    )
    serve.add_argument(
        "--replay",
        type=_count,
        default=100,
        metavar="N",
        help="events replayed to a client that attaches (default: %(default)s)",
    )
    serve.add_argument("--json", action="store_true", help="announce where it listens as JSON")
    remote = serve.add_argument_group("over WebSocket (needs agent-channel-acp[remote])")
    remote.add_argument(
        "--ws",
        type=_port,
        metavar="PORT",
        help="also listen over WebSocket at ws://HOST:PORT/acp (0: any free port); clients "
        "present the discovery record's token (or --token-file's)",
    )
    remote.add_argument(
        "--ws-host",
        default="127.0.0.1",
        metavar="HOST",
        help="where --ws listens (default: %(default)s); beyond loopback only with TLS",
    )
    remote.add_argument("--tls-cert", metavar="PATH", help="TLS certificate (PEM): wss://")
    remote.add_argument("--tls-key", metavar="PATH", help="its private key (PEM)")
    remote.add_argument(
        "--token-file",
        metavar="PATH",
        help="the token clients present (a file only its owner reads) instead of a random one",
    )


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
        add_remote(p)
        return p

    ls = verb("ls", "list the running servers and their executions", target="none")
    ls.description = (
        "List the running servers and their executions: each server's pid, where it "
        "listens, since when, and the store that keeps its executions (if any). Exit "
        "status 1 when a server cannot be reached: with --server, one line says why and "
        "nothing is listed; otherwise the others are listed and each one not answering is "
        "a line on stderr (in --json, an entry with its error)."
    )
    messages = verb("messages", "print an execution's conversation", target="optional")
    amount = messages.add_mutually_exclusive_group()
    amount.add_argument(
        "--tail", type=_positive_int, metavar="N", help="the last N messages (default: 20)"
    )
    amount.add_argument("--all", action="store_true", help="every message")
    messages.add_argument("--full", action="store_true", help="messages raw, not summarised")
    messages.add_argument(
        "--child", metavar="ID", help="a child's conversation instead (id or unique prefix)"
    )
    send = verb("send", "send a message to an execution (read at its next step)")
    send.add_argument("text", metavar="TEXT", help="the message")
    send.add_argument(
        "--child", metavar="ID", help="steer this child of it instead (id or unique prefix)"
    )
    cancel = verb("cancel", "interrupt an execution's turn (as session/cancel does)")
    cancel.add_argument(
        "--child", metavar="ID", help="stop this child of it instead (id or unique prefix)"
    )
    answer = verb("answer", "answer the question the agent is waiting on (ask_user)")
    answer.add_argument("text", metavar="TEXT", help="the answer")
    tool = verb("cancel-tool", "cancel one running tool call; the turn goes on")
    tool.add_argument("tool_call_id", metavar="TOOL_CALL_ID")
    queue = verb("queue", "show the operator messages the agent has not read yet")
    queue.add_argument("--withdraw", metavar="ID", help="withdraw this queued message instead")
    end = verb("end", "end an execution (not an interrupt: its loop stops)")
    end.add_argument("--reason", metavar="TEXT", help="why, shown to attached clients")
    verb("bridge", "relay stdio to a running agent (launch this from Zed)", target="optional")
    web = verb("web", "print the web console's address, its token included", target="none")
    web.add_argument("--open", action="store_true", help="open it in a browser too")


def add_remote(parser: argparse.ArgumentParser) -> None:
    """``--server``: a server by its WebSocket url instead of the local discovery records."""
    group = parser.add_argument_group("a server over WebSocket")
    group.add_argument(
        "--server",
        metavar="URL",
        help="ws://HOST:PORT or wss://HOST:PORT (a serve --ws) instead of the local servers",
    )
    group.add_argument(
        "--token-file",
        metavar="PATH",
        help="its token (default: the local discovery record's for that url)",
    )
    group.add_argument("--cafile", metavar="PATH", help="CA certificates to trust for wss:// (PEM)")


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
