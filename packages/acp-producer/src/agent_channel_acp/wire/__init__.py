"""What both ends agree on: frames, the line transport, JSON-RPC, discovery records, stdio."""
