"""``agent-channel-acp``: serve an agent to an ACP client.

Kept import-light: ``--help`` and argument errors never import ``acp`` (about
0.7 s) or the agent. The agent factory is loaded by dotted path, so this
package never imports a consumer package.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

DEMO = "agent_channel_react.demo:demo"

_DESCRIPTION = """\
Serve an agent-channel agent over the Agent Client Protocol (ACP).

An ACP client (Zed, JetBrains, any ACP client) launches this command and talks
JSON-RPC on its stdin/stdout. Every session/new starts one agent execution;
prompts are posted to it, a cancel interrupts it, and what it does streams back
as session/update notifications. Logs go to stderr only.
"""

_STDIO_EPILOG = """\
examples:
  agent-channel-acp stdio --demo
      the demo ReAct agent (scripted model; needs agent-channel-acp[demo]).
      With --model, or OPENAI_BASE_URL / OPENAI_API_KEY / AGENT_CHANNEL_MODEL
      set, the demo uses an OpenAI-compatible server instead.
  agent-channel-acp stdio --agent mypkg.agents:factory --model gpt-4o-mini --approve
      your own agent: `factory(model)` returns the async execution body.

environment:
  AGENT_CHANNEL_ACP_LOG   log level on stderr (default WARNING)
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agent-channel-acp",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    stdio = sub.add_parser(
        "stdio",
        help="serve one ACP client on stdin/stdout (the client launches this process)",
        description="Serve one ACP client on stdin/stdout.",
        epilog=_STDIO_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    which = stdio.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--agent",
        metavar="MODULE:FACTORY",
        help="agent factory by dotted path: factory(model) -> async body",
    )
    which.add_argument("--demo", action="store_true", help=f"serve the demo agent ({DEMO})")
    stdio.add_argument("--model", metavar="NAME", help="model name passed to the factory")
    stdio.add_argument(
        "--approve",
        action="store_true",
        help="ask the client (session/request_permission) before every tool call",
    )
    stdio.add_argument(
        "--context-window",
        type=int,
        metavar="TOKENS",
        help="the model's context size; enables usage_update notifications",
    )
    stdio.add_argument(
        "--log-level",
        default=os.environ.get("AGENT_CHANNEL_ACP_LOG", "WARNING"),
        help="stderr log level (default: %(default)s)",
    )
    demo = sub.add_parser(
        "demo",
        help="watch an operator drive the demo agent through a real ACP client",
        description=(
            "Start `agent-channel-acp stdio --demo` as an editor would, then play an operator: "
            "a prompt, a stop in the middle of a tool call, a redirect, and a message queued "
            "while the agent works. Exits non-zero if the agent did not behave as described."
        ),
    )
    demo.add_argument("--json", action="store_true", help="one JSON object per line, for programs")
    demo.add_argument(
        "--tool-seconds",
        type=float,
        default=1.5,
        metavar="S",
        help="how long each demo tool takes (default: %(default)s)",
    )
    return parser


def load_factory(spec: str) -> Callable[..., Any]:
    """Import ``module:attr`` (attr may be dotted) and check it is callable."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"expected MODULE:FACTORY, got {spec!r}")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise TypeError(f"{spec} is not callable")
    return obj


def main(argv: Sequence[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    if args.command == "demo":
        from ._tour import run_tour

        sys.exit(run_tour(as_json=args.json, tool_seconds=args.tool_seconds))
    logging.basicConfig(
        stream=sys.stderr,
        level=str(args.log_level).upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    spec = DEMO if args.demo else args.agent
    try:
        factory = load_factory(spec)
    except ModuleNotFoundError as e:
        hint = " (install the demo: pip install 'agent-channel-acp[demo]')" if args.demo else ""
        sys.exit(f"agent-channel-acp: cannot import {spec}: {e}{hint}")
    except (ValueError, TypeError, AttributeError, ImportError) as e:
        sys.exit(f"agent-channel-acp: cannot load {spec}: {e}")

    from ._server import AcpServer
    from ._stdio import run_stdio

    server = AcpServer(
        factory, model=args.model, approve=args.approve, context_window=args.context_window
    )
    code = run_stdio(server)
    logging.shutdown()
    sys.stderr.flush()
    os._exit(code)  # do not wait for worker threads of abandoned tools
