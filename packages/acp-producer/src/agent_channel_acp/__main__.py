"""``python -m agent_channel_acp``: the CLI."""

from .cli._main import main

main()
