"""The indexer's threads give the CPU to the model.

Building an index (reading, tokenizing, suffix sorting) and a completion run at the same
time on a machine with few cores: measured on a 2-core machine with the workspace's first
index being built (11 MB of Python), completions took 1.0-2.6 s instead of 0.4-0.8 s. The
index's own threads therefore run at the lowest CPU priority (Linux lets a thread lower its
own, and threads it starts inherit it): while the model runs they get little, between
requests (the user typing) they get all of it. Elsewhere it is a no-op.
"""

from __future__ import annotations

import logging
import os
import sys
import threading

log = logging.getLogger(__name__)

BACKGROUND_NICE = 19
"""The nice value of an index thread (19: the lowest priority)."""


def lower_thread_priority(nice: int = BACKGROUND_NICE) -> bool:
    """Lower the calling thread's CPU priority to ``nice`` (Linux only: per-thread nice
    values; elsewhere ``setpriority`` would name the process, so nothing is done). True
    when it was done. Only for threads the indexer owns: a thread cannot raise its
    priority again."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        tid = threading.get_native_id()
        if os.getpriority(os.PRIO_PROCESS, tid) < nice:
            os.setpriority(os.PRIO_PROCESS, tid, nice)
        return True
    except (AttributeError, OSError) as exc:  # no per-thread nice here: run as it is
        log.debug("could not lower the index thread's priority: %s", exc)
        return False
