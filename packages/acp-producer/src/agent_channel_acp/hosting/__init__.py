"""Hosting executions for attach mode: listeners, discovery records, the serve loop."""
