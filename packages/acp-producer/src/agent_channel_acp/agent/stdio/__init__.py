"""Stdio mode: one client over the process's stdin/stdout, one execution per session."""
