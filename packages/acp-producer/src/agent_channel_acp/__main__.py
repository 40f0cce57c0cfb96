"""``python -m agent_channel_acp``: the CLI."""

from ._cli import main

main()
