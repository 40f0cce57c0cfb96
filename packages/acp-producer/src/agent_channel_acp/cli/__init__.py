"""The ``agent-channel-acp`` command line."""
