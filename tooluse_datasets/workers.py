"""Worker processes that end with the process that started them.

A pool's workers wait on a pipe whose write end they inherited themselves, so a parent killed outright
(``kill -9``, the out-of-memory killer, ``os._exit``) leaves them waiting for ever, each holding its memory.
Given as a pool's ``initializer``, :func:`exit_with_parent` makes a worker end within a second of its parent.
"""
from __future__ import annotations

import os
import threading
import time

CHECK_SECONDS = 1.0


def exit_with_parent() -> None:
    """Start a daemon thread that ends this process once its parent is gone (it is then adopted: its parent id
    changes). The parent is whichever process forked this one: the pool's owner, or under the forkserver start
    method the fork server, which itself ends with the owner."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(CHECK_SECONDS)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()
