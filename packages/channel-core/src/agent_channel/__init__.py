"""agent_channel."""
