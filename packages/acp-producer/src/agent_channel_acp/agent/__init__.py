"""The ACP agent side: what both handlers share; stdio and attach mode below."""
