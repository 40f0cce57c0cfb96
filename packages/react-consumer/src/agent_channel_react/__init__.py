"""agent_channel_react."""
