"""The operator console: ``agent-channel-acp attach`` (Textual, the ``console`` extra).

:mod:`._state` folds the attach wire into what is shown, :mod:`._link` is the ACP
client that keeps it fed (and reconnects), :mod:`._app` draws it. The first two need no
terminal library: the demo's operator script (``_script``) and the tests use them too.
"""

from __future__ import annotations

INSTALL_HINT = "the console needs Textual: pip install 'agent-channel-acp[console]'"
