"""A process that must not outlive the one that started it: `ocrq serve`'s workers."""

from __future__ import annotations

import os
import signal
import threading
import time


def end_with_parent(parent_pid: int, *, every_s: float = 0.5, grace_s: float = 5.0) -> threading.Thread:
    """Watch our parent from a thread; once it is gone (even SIGKILLed), SIGTERM our process group (the worker,
    its pool children, its beat), and SIGKILL it grace_s later. PR_SET_PDEATHSIG alone sends one signal, which
    a worker finishing its page, or a beat child that never got it, can outlast."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(every_s)
        # Signals first, and no log line: whoever read our output is gone, and logging's lock can be held for
        # good (seen: by the idle main thread, with this thread waiting on it for 13 minutes).
        # Our own group only when we lead it (serve starts each worker in a session of its own).
        end = os.killpg if os.getpgid(0) == os.getpid() else os.kill
        end(os.getpid(), signal.SIGTERM)
        time.sleep(grace_s)
        end(os.getpid(), signal.SIGKILL)

    thread = threading.Thread(target=watch, name="parent-watch", daemon=True)
    thread.start()
    return thread
