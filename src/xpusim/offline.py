"""Whether a model name may be looked up on the Hugging Face hub (workloads/resolve.py).

HF_HUB_OFFLINE as huggingface_hub reads it, or the running command's --offline flag
(cli_lists.offline_option), which marks that command's click context: the mark goes with the
command, whatever way it ends, so nothing outlives it in a process that runs several (tests,
the web server).
"""

from __future__ import annotations

import os
import sys

FLAG = "xpusim.offline"
"""The key --offline sets in the running command's click context's `meta`."""


def offline() -> bool:
    """--offline on the running command, or HF_HUB_OFFLINE set to anything but 0, false,
    no, off or nothing."""
    flag = os.environ.get("HF_HUB_OFFLINE", "").strip().lower()
    if flag not in ("", "0", "false", "no", "off"):
        return True
    click = sys.modules.get("click")  # no click imported: no command is running
    ctx = click.get_current_context(silent=True) if click else None
    return bool(ctx and ctx.meta.get(FLAG))
