"""Engines: where shard tasks run. :func:`run_tasks` yields ``(task, result)`` in the calling process as each
task finishes (in any order; the coordinator merges in plan order), so every engine gives the same mirror.

* ``local``: in this process, one task after another; with ``num_proc`` > 1, a pool of that many processes
  started from a fork server or spawned, never forked from the caller, so it is safe wherever the caller runs
  (threads, notebooks, macOS); a script that builds with ``num_proc`` needs the usual
  ``if __name__ == "__main__":`` guard.
* ``ray``: Ray tasks, on a running cluster (``address``, or ``"auto"``) or on a local Ray started for the
  build (or for several builds, :func:`shared_ray`). ``num_proc`` caps how many run at once (default: as many
  as the cluster has CPUs). Ray is an optional extra, imported only here.

A bad row under ``on_error="raise"`` is the build's answer: no further task starts, and it is raised as the
typed error (tasks already running end with the pool or Ray the build stops; on a Ray that goes on, the caller's
own or one :func:`shared_ray` started, they are waited for, never cancelled); with several workers, the tasks
before it in the plan still running are waited for, so that the error raised is the first bad row in plan order,
the one a single process meets (not whichever worker failed first). Any other failure (a worker that died, a
full disk, an unreachable file) is charged to its shard and yielded as a :class:`ShardFailure`; the other
shards go on.
"""
from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import logging
import os
import pickle
import signal
import socket
import sys
import threading
from typing import Callable, Iterator, Optional, Sequence, Union

from ..errors import ToolUseDataError
from ..workers import exit_with_parent
from .manifest import MirrorError
from .shard_task import ABANDONED, ShardTask, convert_shard

logger = logging.getLogger("tooluse_datasets")

ENGINES = ("local", "ray")
RAY_EXTRA_HINT = 'pip install "tooluse-datasets[ray]"'

Outcome = Union[dict, "ShardFailure"]


class ShardsFailedError(MirrorError):
    """Some shards failed for reasons other than bad rows; the finished ones are kept for a retry."""


class EngineUnavailableError(MirrorError):
    """The engine could not start (no Ray cluster at the address): nothing ran, a retry may work."""


@dataclasses.dataclass
class ShardFailure:
    task: ShardTask
    error: str  # "<type>: <message>"

    def describe(self) -> str:
        return f"{self.task.split.name} shard {self.task.index} ({self.task.shard.name}): {self.error}"


def check_engine(engine: str, num_proc: Optional[int], address: Optional[str]) -> None:
    """Raise :class:`MirrorError` for engine options that cannot run (before a build stages anything, so that
    a typo does not cost the shards a resumable build has finished)."""
    if engine not in ENGINES:
        raise MirrorError(f"unknown engine {engine!r}; choose one of {list(ENGINES)}")
    if num_proc is not None and (isinstance(num_proc, bool) or not isinstance(num_proc, int)):
        # "2" failed comparing a str with an int, 1.5 once the pool was started
        raise MirrorError(f"num_proc must be an integer (at least 1) or None, got {num_proc!r}")
    if num_proc is not None and num_proc < 1:
        raise MirrorError(f"num_proc must be at least 1, got {num_proc}")
    if address is not None and engine != "ray":
        raise MirrorError("an address (--address) is for engine 'ray' (--engine ray)")
    if engine == "ray" and importlib.util.find_spec("ray") is None:
        raise MirrorError(f"engine 'ray' (--engine ray) needs Ray, which is not installed; install the extra: "
                          f"{RAY_EXTRA_HINT}")
    ray = sys.modules.get("ray")
    if engine == "ray" and not (ray is not None and ray.is_initialized()):
        address = _cluster_address(address)
        if address == "auto":  # Ray itself connects to RAY_ADDRESS then, where it is set
            address = os.environ.get("RAY_ADDRESS") or address
        _check_reachable(address)


def _cluster_address(address: Optional[str]) -> Optional[str]:
    # RAY_ADDRESS (set in `ray job submit` jobs and on cluster nodes) names a cluster as --address does.
    return address if address is not None else os.environ.get("RAY_ADDRESS") or None


def _check_reachable(address: Optional[str]) -> None:
    """A ``host:port`` that refuses or does not answer, or where another server than Ray's answers (the
    dashboard's port, 8265, given for the cluster's), is refused here: Ray would retry it for minutes, printing
    only its own warnings. (``auto`` is left to Ray, which answers at once.)"""
    host_port = (address or "").split("://", 1)[-1]
    host, sep, port = host_port.rpartition(":")
    if not sep or not port.isdigit() or not host:
        return
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S) as connection:
            speaks_grpc = os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true") or _answers_http2(connection)
    except OSError as exc:
        raise EngineUnavailableError(f"no Ray cluster answers at {address!r} ({exc or type(exc).__name__}): start "
                                     "one (`ray start --head`) or correct address (--address) / RAY_ADDRESS") from None
    if not speaks_grpc:
        raise EngineUnavailableError(f"what answers at {address!r} is not a Ray cluster (it does not speak gRPC, as "
                                     "Ray's GCS does): give the address `ray start --head` printed (port 6379 by "
                                     "default; 8265 is the dashboard's) in address (--address) / RAY_ADDRESS")


CONNECT_TIMEOUT_S = 10
# HTTP/2's client preface and an empty SETTINGS frame: a gRPC server (Ray's GCS, a Ray Client server) answers with
# a SETTINGS frame of its own. (A GCS with TLS, RAY_USE_TLS, is not asked.)
_HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
_HTTP2_SETTINGS = 4


def _answers_http2(connection: socket.socket) -> bool:
    connection.sendall(_HTTP2_PREFACE)
    header = b""
    while len(header) < 9:  # a frame header: length (3 bytes), type, flags, stream (4)
        chunk = connection.recv(9 - len(header))
        if not chunk:
            return False
        header += chunk
    return header[3] == _HTTP2_SETTINGS


def run_tasks(tasks: Sequence[ShardTask], *, engine: str = "local", num_proc: Optional[int] = None,
              address: Optional[str] = None) -> Iterator[tuple[ShardTask, Outcome]]:
    """Run ``tasks`` on ``engine``; yields each task with its result dict or its :class:`ShardFailure`."""
    check_engine(engine, num_proc, address)
    if not tasks:
        return iter(())
    if engine == "ray":
        return _run_ray(tasks, num_proc, address)
    if num_proc is None or num_proc == 1:
        return _run_here(tasks)
    return _run_pool(tasks, num_proc)


class _FirstBadRow:
    """The typed error of the first task in plan order that met a bad row (``on_error="raise"``)."""

    def __init__(self):
        self.position: Optional[int] = None
        self.error: Optional[ToolUseDataError] = None

    def __bool__(self) -> bool:
        return self.error is not None

    def beyond(self, position: int) -> bool:
        """Whether a task at ``position`` comes after the bad row found so far (its outcome no longer matters)."""
        return self.position is not None and position > self.position

    def seen(self, position: int, error: ToolUseDataError) -> None:
        if self.position is None or position < self.position:
            self.position, self.error = position, error

    def raise_it(self) -> None:
        if self.error is not None:
            raise self.error from None


class UnpicklableFailure(Exception):
    """A worker's failure that could not travel back to the build as it was, told by its type and message."""


def _failure(task: ShardTask, exc: BaseException) -> ShardFailure:
    failure = ShardFailure(task, str(exc) if isinstance(exc, UnpicklableFailure) else f"{type(exc).__name__}: {exc}")
    logger.error("mirror: shard failed: %s", failure.describe())
    return failure


def outcome(task: ShardTask, result: dict) -> Outcome:
    """A task's result, or its failure where it found its parts folder gone (:func:`.shard_task.abandoned`)."""
    if ABANDONED not in result:
        return result
    failure = ShardFailure(task, f"MirrorError: {result[ABANDONED]}")
    logger.error("mirror: shard failed: %s", failure.describe())
    return failure


def _in_worker(convert: Callable[[ShardTask], dict], task: ShardTask) -> dict:
    """``convert(task)`` in a pool's worker or a Ray task. A failure that cannot be pickled (an HTTP error holding
    its response's headers, an exception whose class needs other arguments to be made again) reached the build
    as the pickling error alone (the pool) or as Ray's traceback of it: it is sent as its type and message."""
    try:
        return convert(task)
    except ToolUseDataError:
        raise  # pickled with its location (its __reduce__)
    except Exception as exc:
        try:
            pickle.loads(pickle.dumps(exc))
        except Exception:
            raise UnpicklableFailure(f"{type(exc).__name__}: {exc}") from None
        raise


def _run_here(tasks: Sequence[ShardTask]) -> Iterator[tuple[ShardTask, Outcome]]:
    for task in tasks:
        try:
            result = convert_shard(task)
        except ToolUseDataError:
            raise
        except Exception as exc:
            yield task, _failure(task, exc)
            continue
        yield task, outcome(task, result)


def _run_pool(tasks: Sequence[ShardTask], num_proc: int) -> Iterator[tuple[ShardTask, Outcome]]:
    from concurrent.futures import ProcessPoolExecutor, as_completed

    with ProcessPoolExecutor(max_workers=min(num_proc, len(tasks)), mp_context=_pool_context(tasks[0]),
                             initializer=exit_with_parent, initargs=(os.getpid(),)) as pool:
        futures = {pool.submit(_in_worker, convert_shard, task): (position, task)
                   for position, task in enumerate(tasks)}
        bad_row = _FirstBadRow()
        try:
            for future in as_completed(futures):
                position, task = futures[future]
                if bad_row.beyond(position):
                    continue
                try:
                    result = future.result()
                except ToolUseDataError as exc:
                    bad_row.seen(position, exc)
                    for other, (later, _) in futures.items():
                        if later > position:
                            other.cancel()  # not started yet: it never will
                    continue
                except Exception as exc:  # includes BrokenProcessPool: a worker died
                    if not bad_row:
                        yield task, _failure(task, exc)
                    continue
                if not bad_row:
                    yield task, outcome(task, result)
            bad_row.raise_it()
        except BaseException:  # also GeneratorExit: the caller stopped
            _stop_workers(pool)
            pool.shutdown(wait=True, cancel_futures=True)
            raise


def _stop_workers(pool) -> None:
    """End the pool's workers now: their running shards are no longer wanted (the staging keeps only finished
    shards), and shutdown would wait for each to finish, seconds, when the caller stopped. A terminal's Ctrl-C
    reaches the workers too, but a SIGINT sent to this process alone (``kill -INT``, a job runner) does not."""
    terminate = getattr(pool, "terminate_workers", None)  # Python 3.14
    if terminate is not None:
        terminate()
        return
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        process.terminate()


def _pool_context(task: ShardTask):
    """Workers start from a fresh interpreter, never a fork of the caller (its threads, locks and open files
    stay its own): a fork server where the platform has one, else spawn. The fork server imports the task's
    modules once, so each worker starts in milliseconds instead of importing datasets and pyarrow again
    (measured 1.3 s for the first pool of 2 and 0.07 s for the next, against 1.8-2.2 s for every spawned pool)."""
    import multiprocessing

    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    from ..formats import WRITERS

    context = multiprocessing.get_context("forkserver")
    # Only read when the (process-wide) fork server starts; a server someone else started works as well.
    writers = [WRITERS[c].partition(":")[0] for c in task.configs if c in WRITERS]
    context.set_forkserver_preload([convert_shard.__module__, type(task.source).__module__, *writers])
    return context


def _run_ray(tasks: Sequence[ShardTask], num_proc: Optional[int],
             address: Optional[str]) -> Iterator[tuple[ShardTask, Outcome]]:
    ray = _import_ray()
    stop_ray = _start_ray(ray, num_proc, address) if not ray.is_initialized() else None
    # Tasks no longer wanted are never cancelled: a cancel races with the task's reply on its way, which crashes
    # Ray 2.60's driver ("Tried to complete task that was not pending", exit 1), with force or without (runs of
    # four Ctrl-C's on a caller's Ray: 3 of 5 crashed its process with force, 3 of 6 without, 0 of 11 without
    # cancelling). A Ray this build stops ends them itself. On a Ray that goes on after the build (the caller's own,
    # or one shared_ray started for the next builds), a bad row waits for the tasks already running (at most
    # num_proc shards), so that none writes into the staging folder the error deletes; a build stopped midway
    # leaves them to end on their own (within a shard's time; their results are not recorded, so the next run
    # converts those shards again).
    ends_with_ray = stop_ray is not None
    running: dict = {}
    try:
        limit = num_proc or max(1, int(ray.cluster_resources().get("CPU", 1)))
        remote = ray.remote(num_cpus=1)(_in_worker)
        queue = list(enumerate(tasks))
        bad_row = _FirstBadRow()
        while queue or running:
            while queue and len(running) < limit and not bad_row:  # at most `limit` at once: num_proc workers
                position, task = queue.pop(0)
                running[remote.remote(convert_shard, task)] = (position, task)
            if not running:
                break
            ready, _ = ray.wait(list(running), num_returns=1)
            position, task = running.pop(ready[0])
            try:
                result = ray.get(ready[0])
            except Exception as exc:
                cause = getattr(exc, "cause", None)
                if isinstance(cause, ToolUseDataError):
                    bad_row.seen(position, cause)
                    if ends_with_ray:  # the tasks after it in the plan end with the Ray: not waited for
                        for ref, (later, _) in list(running.items()):
                            if later > position:
                                del running[ref]
                elif not bad_row:
                    yield task, _failure(task, cause if isinstance(cause, BaseException) else exc)
                continue
            if not bad_row:
                yield task, outcome(task, result)
        bad_row.raise_it()
    finally:
        for ref in running:
            # Left to end on their own (a stopped build): a failure no one fetches, a bad row met late, would be
            # printed by Ray in this process later as "Unhandled error" with the worker's traceback. A future
            # taking their outcome counts as fetching it.
            ref.future()
        if stop_ray is not None:
            stop_ray()


@contextlib.contextmanager
def shared_ray(engine: str, num_proc: Optional[int], address: Optional[str]) -> Iterator[None]:
    """One Ray for several builds (``mirror`` of several sources): each build runs on it instead of starting and
    stopping a Ray of its own, which takes seconds and, with Ray 2.60, leaves a socket open in this process per
    start-up. Nothing to do for the local engine, or when this process already runs Ray."""
    ray = sys.modules.get("ray")
    if engine != "ray" or (ray is not None and ray.is_initialized()):
        yield
        return
    stop_ray = _start_ray(_import_ray(), num_proc, address)
    try:
        yield
    finally:
        stop_ray()


def _import_ray():
    try:
        import ray
    except ImportError as exc:
        raise MirrorError(f"engine 'ray' (--engine ray) needs Ray, which is not installed ({exc}); install the extra: "
                          f"{RAY_EXTRA_HINT}") from None
    return ray


def _start_ray(ray, num_proc: Optional[int], address: Optional[str]) -> Callable[[], None]:
    """Start Ray (or connect to the cluster) for a build or a command; returns what stops it. ``ray.init``
    replaces this process's SIGTERM handler with its own (``sys.exit``), which ``ray.shutdown`` leaves in place:
    the caller's handler is put back once Ray is up (:func:`_handle_sigterm_in_python`), and again when Ray stops
    or fails to start."""
    sigterm = _sigterm_handler()
    address = _cluster_address(address)  # Ray refuses num_cpus for a cluster it connects to
    try:
        if address is not None:
            try:
                ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
            except ConnectionError as exc:
                raise EngineUnavailableError(f"cannot connect to a Ray cluster at {address!r}: {exc}"
                                             f"{_token_hint(address)}") from None
        else:  # a local Ray for this build: num_proc CPUs (default: all)
            # "local": a new Ray of its own. Without an address Ray joins the last cluster `ray start` left on this
            # machine instead, and then refuses num_cpus (ValueError) or runs on that cluster's CPUs.
            with _quiet_default_token_auth():
                ray.init(address="local", num_cpus=num_proc, include_dashboard=False, log_to_driver=False,
                         logging_level=logging.WARNING)
    except SystemExit as exc:
        _restore_sigterm(sigterm)
        if exc.code == signal.SIGTERM and callable(sigterm):  # ray.init's handler met a SIGTERM while Ray started
            sigterm(signal.SIGTERM, None)  # the caller's answer to it (the command line's: exit 143)
        raise
    except BaseException:
        _restore_sigterm(sigterm)
        raise
    _handle_sigterm_in_python(sigterm)

    def stop() -> None:
        try:
            ray.shutdown()
        finally:
            _restore_sigterm(sigterm)

    return stop


@contextlib.contextmanager
def _quiet_default_token_auth() -> Iterator[None]:
    """Without RAY_AUTH_MODE, a new local Ray takes token authentication (Ray 2.60: the token in ~/.ray/auth_token,
    generated if missing) and says so on every start: "Token authentication is enabled for this Ray cluster. Set
    RAY_AUTH_MODE=disabled to opt out", advice about a cluster that lives only as long as the build. That one
    message is left out; the choice stays Ray's. (Setting RAY_AUTH_MODE=token instead, which Ray accepts without
    the message, is not enough once Ray is imported: Ray has read the mode by then, and the Ray it starts would
    want a token it never generated.)"""
    token_setup = logging.getLogger(_RAY_TOKEN_SETUP_LOGGER)
    token_setup.addFilter(_not_default_token_auth_notice)
    try:
        yield
    finally:
        token_setup.removeFilter(_not_default_token_auth_notice)


_RAY_TOKEN_SETUP_LOGGER = "ray._private.authentication.authentication_token_setup"


def _not_default_token_auth_notice(record: logging.LogRecord) -> bool:
    return not record.getMessage().startswith("Token authentication is enabled for this Ray cluster")


def _token_hint(address: str) -> str:
    """Why a cluster that answers may still refuse this driver. `ray start` enables token authentication by
    default (Ray 2.60), and Ray sends the token to an address given explicitly (not ``auto``) only with
    ``RAY_AUTH_MODE=token``, even when the token is in ``~/.ray/auth_token``: Ray retries for 20 seconds, logging
    "InvalidAuthToken", and then says only that it failed to connect."""
    if address == "auto" or os.environ.get("RAY_AUTH_MODE", "").lower() == "token":
        return ""
    return ("; a cluster with token authentication (the default of `ray start`) refuses a driver that does not "
            "send its token, and Ray sends it to an explicit address only with RAY_AUTH_MODE=token: set "
            "RAY_AUTH_MODE=token, with the cluster's token in ~/.ray/auth_token, RAY_AUTH_TOKEN_PATH or RAY_AUTH_TOKEN")


def _sigterm_handler():
    """This process's SIGTERM handler, if it can be put back (only the main thread sets handlers; None: one
    not set from Python)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.getsignal(signal.SIGTERM)


def _handle_sigterm_in_python(callers) -> None:
    """While Ray runs, SIGTERM goes to the caller's handler where it has one of its own (the command line's
    stops the build as Ctrl-C does, exit 143), else to the one ``ray.init`` set (``sys.exit``, so the build
    still cleans up). Set again here in any case: the Ray driver's core worker puts a crash reporter of its own
    under Python's handler, which on SIGTERM prints a stack dump and at times aborts the process (exit 134)."""
    if threading.current_thread() is not threading.main_thread():
        return
    handler = callers if callable(callers) else signal.getsignal(signal.SIGTERM)
    if handler is not None:
        signal.signal(signal.SIGTERM, handler)


def _restore_sigterm(handler) -> None:
    if handler is not None and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, handler)
