"""agent_channel_acp."""
