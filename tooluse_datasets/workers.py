"""Worker processes that end with the process that started them.

A pool's workers wait on a pipe whose write end they inherited themselves, so a parent killed outright
(``kill -9``, the out-of-memory killer, ``os._exit``) leaves them waiting for ever, each holding its memory.
Given as a pool's ``initializer``, :func:`exit_with_parent` makes a worker end within a second of its parent
(or of the pool's owner, for workers started from a fork server).

A worker forked from the caller (the fork start method) inherits its uncollected garbage too. Collecting it there
runs finalizers of the caller's objects in the worker, and one of them can wait for ever: a stopped stream's
worker pool, collected, takes a lock its manager thread held at the fork. Workers started within
:func:`forking_workers` leave such garbage to the caller, and take SIGTERM's default action (see
:func:`_default_sigterm`).
"""
from __future__ import annotations

import contextlib
import gc
import os
import signal
import threading
import time
from typing import Iterator, Optional

CHECK_SECONDS = 1.0


def exit_with_parent(owner: Optional[int] = None) -> None:
    """Start a daemon thread that ends this process once its parent is gone (it is then adopted: its parent id
    changes), or ``owner``, the process that started the pool, if given. Under the forkserver start method the
    parent is the fork server, which does not end with the owner: every worker holds the fork server's "alive"
    pipe, so the server sees no end of it while a worker runs, and the worker never sees its parent go. Such a
    pool passes ``initargs=(os.getpid(),)``."""
    parent = os.getppid()
    # Only a fork server's workers (POSIX) have an owner other than their parent; on Windows os.kill(pid, 0)
    # would send a Ctrl-C event.
    owner = owner if owner != parent else None

    def watch() -> None:
        while True:
            time.sleep(CHECK_SECONDS)
            if os.getppid() != parent or (owner is not None and not _alive(owner)):
                os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # no signal sent: only whether the process exists (and is ours: its id not reused)
    except OSError:
        return False
    # A process killed but not yet waited for by its caller (a Popen without wait()) still exists, as a zombie.
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rpartition(b")")[2].split()[0] != b"Z"
    except (OSError, IndexError):
        return True  # no /proc (macOS): the process exists


_forking_workers = False
# Whether processes forked meanwhile end with their parent (exit_with_parent): for pools that take no initializer.
_watching_parent = False
# One thread forks workers at a time: datasets' shuffle and interleave_datasets read streams from threads, each
# starting its pool, and forks from two threads at once collide (filelock >= 4.3 on Python >= 3.12 refuses a fork
# while another thread is forking: RuntimeError), as would the flag above, one for the process.
_forking = threading.Lock()


@contextlib.contextmanager
def forking_workers(watch_parent: bool = False) -> Iterator[None]:
    """Processes forked meanwhile freeze what they inherit out of the garbage collector (the caller's own
    collector is left as it is), and with ``watch_parent`` end with their parent (:func:`exit_with_parent`, for a
    pool that takes no initializer: datasets' own); one thread at a time."""
    global _forking_workers, _watching_parent
    with _forking:
        _forking_workers, _watching_parent = True, watch_parent
        try:
            yield
        finally:
            _forking_workers = _watching_parent = False


# The forking thread's signal mask while it forks a worker (SIGTERM blocked), to restore after.
_mask_before_fork: Optional[set] = None


def _before_fork() -> None:
    """SIGTERM is held back across the fork: a pool that ends right after starting its workers (a map over one
    or two files) can send it before the child has put the default action in place, and a signal arriving then
    runs the caller's inherited handler, or is dropped by Python ("ignored due to race condition"): the worker
    lived on and the pool waited for it for ever. Held back, it is delivered once the default action is in."""
    global _mask_before_fork
    if _forking_workers and hasattr(signal, "pthread_sigmask"):
        _mask_before_fork = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})


def _after_fork_in_parent() -> None:
    global _mask_before_fork
    if _mask_before_fork is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, _mask_before_fork)
        _mask_before_fork = None


def _after_fork_in_child() -> None:
    global _forking, _mask_before_fork
    _forking = threading.Lock()  # forked holding it (by this thread, gone in the child): free again
    if _forking_workers:  # this process was just forked, by a worker pool started in forking_workers()
        gc.freeze()
        _default_sigterm()
        if _watching_parent:
            exit_with_parent()
    if _mask_before_fork is not None:  # a SIGTERM held back since the fork is delivered now, to the default action
        signal.pthread_sigmask(signal.SIG_SETMASK, _mask_before_fork)
        _mask_before_fork = None


def _default_sigterm() -> None:
    """A pool ends its workers with SIGTERM: a forked worker takes the signal's default action (it ends at once),
    not the handler it inherited from the caller. A Ray driver has two (Ray's Python one calls sys.exit, and its
    native one logs a stack trace from inside the signal handler); seen: after a Ray build in the same process, a
    worker of a prepare with num_proc=2 outlived the pool's SIGTERM, and the prepare waited on it for ever."""
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    except (AttributeError, ValueError, OSError):  # no SIGTERM (Windows), or not this interpreter's main thread
        pass


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                        after_in_child=_after_fork_in_child)
