"""The operator's side: connecting, the verbs, the bridge, the console, the demo script."""
