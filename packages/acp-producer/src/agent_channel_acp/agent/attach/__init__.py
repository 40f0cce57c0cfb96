"""Attach mode: many clients over a socket, executions hosted by the server."""
