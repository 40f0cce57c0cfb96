"""Command line entry point (filled in by the stdio issue)."""


def main() -> None:
    raise SystemExit("agent-channel-acp: not implemented yet")
