"""Run NESTFUL call sequences in a sandbox: one fresh interpreter per batch of samples.

Upstream's executable functions are code with side effects (file writes, network, subprocesses, ``eval``).
They are never imported into this process: :func:`run_sequences` starts ``python -I -S -B child.py`` (the
child is :mod:`.child`, standard library only), sends it the batch and reads one JSON result per sample,
decoded with our exact codec.

What the sandbox stops, and how. Two layers: the kernel's isolation where the kernel allows it, and in
any case an audit hook (PEP 578, irremovable once installed, installed before any upstream code runs) that
refuses what it sees and names the reason. The hook is Python code in the sample's own process: sample code
can switch it off (its state is reachable through ``gc``) or go around it (``dir_fd`` opens, ``mkfifo``,
sqlite's ``ATTACH``, ``_posixsubprocess``), so the kernel is the barrier and the hook the report.

* **kernel isolation** (``kernel_isolation``; reported per result as ``network``, ``filesystem``,
  ``processes``): the child ``unshare``-s new network, mount, IPC and PID namespaces (plus a user namespace
  when not root, mapping its own uid/gid); makes mount propagation private, remounts every mount point
  read-only (keeping its nosuid/nodev/noexec/atime flags) but the batch's sample area (``<root>/work``, a
  new tmpfs of ``disk_mb``, gone with the namespace) and checks it by writing (EROFS outside, success
  inside). Every mount is also ``nodev`` but for /dev/null, /dev/zero, /dev/full, /dev/random, /dev/urandom
  and /dev/tty (each bound onto itself): a read-only mount does not stop writes to a device. It then forks
  a reaper, PID 1 of the new PID namespace, which forks the worker that runs the samples and waits for it;
  the child the parent started exits with the worker's status or re-raises the signal that ended it. The
  worker mounts a /proc of the new PID namespace over the caller's, so a sample sees the batch's processes
  alone (not the caller's command line, nor, for a caller that is not root, its environment).
  After each sample the worker ends every other process of the namespace (``kill(-1)``), and when the
  batch ends, or the parent kills the process group, the namespace ends with whatever is left, ``setsid``
  or not. Before any sample, the worker sets no-new-privileges,
  empties its capability bounding set and drops every capability, so sample code cannot remount, enter
  other namespaces or override file permissions. When the caller is root, the worker first becomes a user of
  the batch's own (uid = gid = ``child.BATCH_IDS`` + the child's process id, no supplementary groups; else
  ``nobody``, 65534, where a user namespace maps few ids), owner of the sample area, and keeps one capability,
  reading files whatever their permissions (``CAP_DAC_READ_SEARCH``: the functions folder and the
  interpreter's packages may be where only root reads): its samples write only where file permissions let that
  user, signal only its processes, are held by ``RLIMIT_NPROC`` and cannot become root again. This is done even
  where no namespace could be made (Docker's default seccomp profile refuses ``unshare``); there, as the batch's
  own user, the worker is a subreaper and ends every process of that user after each sample, as the PID
  namespace would (``kill(-1)`` reaches that user's processes alone); a sample killed for its time never gets
  there, so this process, root, ends that user's processes when it reaps the child. Any step that fails
  falls back to the hook alone and says so (``unavailable: ...`` / ``partial: ...``; a root caller's samples
  that could not change user: ``processes`` ``partial: samples run as root (...)``);
  ``kernel_isolation=True`` makes that an error.
* **network**: in the new network namespace no interface is up and nothing, native code included,
  reaches a network (``network_namespace``: the same None/True/False switch; when the full isolation
  is refused, a network namespace alone is still tried). The hook refuses socket creation, connects,
  DNS lookups and urllib/http.client/ftplib/smtplib... with reason ``network``.
* **processes**: the hook refuses ``subprocess``, ``os.system``, ``os.exec*``, ``os.spawn*``,
  ``os.posix_spawn``, ``os.fork`` and ``pty.spawn`` (``subprocess``) and signals to other processes
  (``signal``). The child is a process-group leader; the group is killed when the batch ends (and with
  kernel isolation the PID namespace ends, taking every process a sample started with it).
* **writes outside the work folder**: each sample runs in a fresh folder of its own under the batch's
  sample area (also its ``HOME`` and ``TMPDIR``); the kernel makes everything outside the sample area
  read-only, and a write that fails with EROFS is reported as ``write_outside_workdir``. The hook refuses
  opening a file for writing, creating, renaming, (hard-)linking, deleting or changing files (relative
  to a ``dir_fd`` too, where the event carries it), ``shutil`` copies/moves/``rmtree`` and ``sqlite3``
  databases (``file:`` URIs included) outside that folder: the batch's root with the logs this process
  reads, other samples' folders (which the kernel leaves writable: only the hook keeps samples apart),
  anywhere else (``write_outside_workdir``). A refusal counts even if upstream code catches the error; the
  check runs per thread, so a thread upstream code starts is checked like the main one.
* **samples apart**: each sample runs in a process of its own, forked from the worker before it ran any
  upstream code, and gone when the sample ends: what a sample changes in the interpreter (modules, builtins,
  environment variables, the working folder, random state, memory it keeps, threads it leaves running) does
  not reach the next one, so a row's outcome does not depend on the rows sharing its batch. The cost is a
  fork per sample (milliseconds) and each sample importing what it needs (numpy, pandas, torch) itself.
* **the result channel**: sample code runs in the process that reports results and can write to the pipe
  (its number is the child's argument). This process takes only well-formed events of the protocol, in
  sequence (``ready``; per sample ``start``, ``call`` as each of its calls starts, its ``result``, then
  ``ended``), and lines no longer than a result can be; anything else kills the child and charges the
  sample that last started (``crashed``, reason ``protocol``), and the batch goes on in a fresh child. A
  crash, kill or CPU limit is charged to the call that last started (``failed_call``). A forged result in
  correct sequence cannot be told apart: a sample can report any result for itself (upstream's ``eval``-based
  functions already let a prediction compute any answer), and, by writing results for the samples after
  it in its child and then exiting, for those too.
* **time**: ``timeout`` seconds of wall-clock per sample (upstream: 10) with a timer in the child; the
  parent kills the child if a sample outlives ``timeout + grace`` (code that swallows the timer, hangs in C
  or writes to the result channel without ending a line), and ``RLIMIT_CPU`` ends it after
  ``cpu_seconds`` of CPU (reason ``timeout`` either way).
* **memory** (``RLIMIT_AS``, each sample's process), file size (``RLIMIT_FSIZE``), open files, no core
  dumps, and with a user namespace of the batch's own (not root) or a root caller's batch user,
  ``RLIMIT_NPROC`` (``child.MAX_TASKS`` processes and threads of that user: bounds what native code forks,
  which no audit event sees). ``RLIMIT_AS`` is per process: each process native code forks gets ``memory_mb``,
  so a sample's memory in all is below ``MAX_TASKS * memory_mb`` where ``RLIMIT_NPROC`` applies and has no
  bound the sandbox sets where it does not (no cgroup is used).
* **crashes**: a segfault, ``os._exit``, an abort or a kill ends the sample's process, not the caller; the
  sample is reported ``crashed`` with the exit status and the batch goes on.
* **environment**: a clean environment (no tokens, proxies or ``PYTHON*`` variables), ``-I`` (no
  user site, no script folder or working directory on ``sys.path``), ``-S`` (no ``.pth`` processing:
  the package itself is not importable in the child); ``sys.path`` is this process's, so numpy,
  pandas or torch that upstream files import resolve as here. stdin is empty; output goes to a log.
* **the caller** is the watchdog: the child dies with it (``PR_SET_PDEATHSIG``), so a caller killed, even by
  SIGKILL, leaves no sample running; the batch's folder, which it can no longer remove, the next sandbox started
  removes (see :func:`_batch_folder`).

What it does not stop: reading any file the user can read; connecting to Unix sockets of local services
through the file system (a read-only mount does not prevent it; the hook refuses creating the socket,
which native code does not ask); a sample past the hook writing in other samples' folders of the batch while it
runs (each sample's folder is made fresh, so nothing planted there reaches a later sample). Without kernel isolation (``unavailable``): native code (C extensions, ``ctypes``), or code that
switches the hook off, opening sockets when no network namespace could be made, writing files the sample's user
may write, or starting processes that outlive the batch (but as a root caller's batch user). A root caller's
samples that could not change user (``partial: samples run as root``): file permissions protect nothing the read-only file system and the hook do
not, and how many processes native code (``ctypes``' libc ``fork``) starts while its sample runs is bounded only
by the PID namespace (they end with the sample). CPU use by other threads beyond the limits above; anything
seccomp would add.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import re
import select
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional, Sequence

from tooluse_datasets.codec import dumps, loads
from tooluse_datasets.errors import ExecutionError

from .functions import REQUIRED_FILES

CHILD = Path(__file__).with_name("child.py")

# reason -> what it means (README and error messages say the same)
REASONS: dict[str, str] = {
    "network": "the sandbox refused network access",
    "subprocess": "the sandbox refused to start a process",
    "write_outside_workdir": "the sandbox refused a write outside the sample's work folder",
    "signal": "the sandbox refused to signal another process",
    "timeout": "the sample ran past its time or CPU limit",
    "memory": "the sample ran out of its memory limit (MemoryError; also while a function's module loaded)",
    "crash": "the sandbox process died (segfault, os._exit, abort, kill)",
    "no_calls": "the sequence has no calls",
    "malformed_call": "a call lacks name/label/arguments or is not an object",
    "unknown_tool": "a call names a tool that is not in the row's tools",
    "no_output_parameters": "the called tool has no output_parameters",
    "bad_reference": "an argument refers to a label or output field no earlier call produced",
    "unknown_function": "no executable function of that name (basic_functions.py, func_file_map.json)",
    "import_error": "the function's module failed to load",
    "exception": "the function raised",
    "multiple_outputs": "the tool has more than one output parameter (the official executor needs one)",
    "result_too_large": "a result's JSON is longer than max_result_chars",
    "protocol": "the sample wrote to the sandbox's result channel what the sandbox does not (a line that is not "
                "one of its events, or out of sequence); the sandbox was killed",
}
STATUSES = ("ok", "error", "refused", "limit", "crashed")
ISOLATION = ("network", "filesystem", "processes")  # what the ready event reports, kept in each SequenceResult
# The largest limits the sandbox can apply: seconds the child's timer (setitimer) takes, and megabytes whose
# bytes fit the kernel's resource limits (a C long). Past them the parent's wait or the child's setrlimit
# overflowed: a raw OverflowError, or every sample of the batch failing with the sandbox's traceback.
MAXIMA: dict[str, float] = {"timeout": 1e8, "grace": 1e8, "cpu_seconds": 10**8, "memory_mb": 2**43 - 1,
                            "file_size_mb": 2**43 - 1, "disk_mb": 2**43 - 1}
# Longest silence allowed from the child while no sample runs (starting up, between samples), counted from its
# last message; a running sample has its own limit (timeout + grace), and its exit after the last one _reap's.
IDLE_SECONDS = 60.0
# Longest wait, after a sample's result, for the child to say the sample's process ended. That process only
# flushes its output and exits, then the worker ends what the sample left and removes its folder: seconds at
# most. Past it the child is killed (the result stands, the rest run in a fresh child), not left to the idle
# limit, which has to allow for a slow start.
ENDING_SECONDS = 5.0


class SandboxError(ExecutionError):
    """The sandbox itself could not run (no interpreter, the child failed before any sample): a typed error, so
    every row of the batch follows the error policy (reported, or skipped and counted) and the CLI says it in
    one line."""

    def __init__(self, message: str, **location):
        super().__init__(message if message.startswith("sandbox: ") else f"sandbox: {message}", **location)


@dataclasses.dataclass(frozen=True)
class SandboxLimits:
    """Per-sample limits of the sandbox.

    Args:
        timeout: wall-clock seconds per sample (upstream's ``signal.alarm(10)``).
        cpu_seconds: CPU seconds per sample (``RLIMIT_CPU``); default (None): ``timeout`` rounded up, so a
            longer timeout is not cut short by the CPU limit.
        memory_mb: address space of the sandbox process (``RLIMIT_AS``); numpy/pandas imports fit.
        file_size_mb: largest file the sample may write (``RLIMIT_FSIZE``).
        grace: seconds past ``timeout`` before the parent kills a sample that ignores its timer.
        network_namespace: ``None`` try a network namespace and fall back to the audit hook alone;
            ``True`` require one (error if unavailable); ``False`` do not try.
        kernel_isolation: mount, IPC and PID namespaces (a read-only file system but the batch's sample area,
            every process a sample starts ends with the sample) and no capabilities: ``None`` try them and
            fall back to the audit hook alone; ``True`` require them (error if unavailable); ``False`` do
            not try.
        max_result_chars: longest JSON text of one result kept.
        disk_mb: what the samples of a batch may write in all, with kernel isolation (the sample area is a
            tmpfs of that size, memory-backed; without it, only ``file_size_mb`` per file bounds writes).
    """

    timeout: float = 10.0
    cpu_seconds: Optional[int] = None
    memory_mb: int = 4096
    file_size_mb: int = 64
    grace: float = 5.0
    network_namespace: Optional[bool] = None
    kernel_isolation: Optional[bool] = None
    max_result_chars: int = 1_000_000
    disk_mb: int = 512

    def __post_init__(self):
        # A limit that is not a positive finite number would not limit: a negative memory_mb wraps to no
        # address-space limit at all, a timeout of 0 switches the timer off, NaN or infinity fail inside the
        # sandbox for every sample. Refused here, naming the field.
        for name in ("timeout", "cpu_seconds", "memory_mb", "file_size_mb", "grace", "max_result_chars", "disk_mb"):
            value = getattr(self, name)
            if name == "cpu_seconds" and value is None:
                continue
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            if not number or not math.isfinite(value) or value < 0 or (value == 0 and name != "grace"):
                least = "0 or more" if name == "grace" else "positive"
                raise ValueError(f"SandboxLimits.{name} must be a {least} finite number, got {value!r}")
            if value > MAXIMA.get(name, math.inf):
                raise ValueError(f"SandboxLimits.{name} must be at most {MAXIMA[name]:.15g}, got {value!r}")

    @property
    def cpu_limit(self) -> int:
        """The CPU seconds a sample gets: ``cpu_seconds``, else the timeout rounded up (never below the wall-clock
        timer: a sample given 30 s must not be stopped after 10 s of CPU). Worked out here, not stored, so that
        ``dataclasses.replace(limits, timeout=30)`` of a default moves it too."""
        return self.cpu_seconds if self.cpu_seconds is not None else max(1, math.ceil(self.timeout))


@dataclasses.dataclass(frozen=True)
class SequenceJob:
    """One call sequence to run.

    Args:
        calls: the calls as parsed (a list of ``{name, label, arguments}``; anything else fails as upstream).
        output_fields: tool name -> its ``output_parameters`` keys (None: the tool declares none), first
            spec of a name wins (as upstream's lookup).
        gold: the gold answer as JSON text (parsed in the child with ``json.loads``, as upstream does), or
            None when there is nothing to compare with.
    """

    calls: Any
    output_fields: dict
    gold: Optional[str] = None


@dataclasses.dataclass
class SequenceResult:
    """What running one sequence gave. ``results``: per executed call ``{"value", "python_type"}`` (see
    :func:`.child.render`); ``answer``: the last one when the sequence completed, with its Python type and repr
    (``type_name``, ``python_repr``: :attr:`answer_type`, :attr:`answer_repr`); ``win_upstream`` /
    ``win_corrected``: the official and the corrected win checks against the gold (None without gold).
    ``network``, ``filesystem``, ``processes``: the isolation the sandbox achieved ("namespace" /
    "read-only", "off", or why not: "unavailable: ...", "partial: ...")."""

    status: str
    reason: Optional[str] = None
    detail: str = ""
    failed_call: Optional[int] = None
    results: list = dataclasses.field(default_factory=list)
    answer: Optional[dict] = None
    win_upstream: Optional[bool] = None
    win_corrected: Optional[bool] = None
    notes: list = dataclasses.field(default_factory=list)
    network: str = ""
    filesystem: str = ""
    processes: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def answer_type(self) -> Optional[str]:
        """The Python type of the answer (``float``, ``tuple``, ``numpy.float64``), None without an answer."""
        return (self.answer or {}).get("type_name") or (self.answer or {}).get("python_type")

    @property
    def answer_repr(self) -> Optional[str]:
        """The answer's Python ``repr`` (at most ANSWER_REPR_CHARS, then marked cut), None without an answer."""
        return (self.answer or {}).get("python_repr")

    def answer_text(self) -> str:
        """The answer as reports print it: its JSON text, and, where that is not the answer exactly (a tuple,
        a numpy value, a dict with non-string keys, NaN or an infinity, written as their repr...), what it is in
        Python: ``"inf" (Python float: inf)``, not the string ``"inf"``."""
        value = dumps((self.answer or {}).get("value"))
        if (self.answer or {}).get("python_type") is None:
            return value
        return f"{value} (Python {self.answer_type}: {self.answer_repr})"

    def describe(self) -> str:
        where = f" at call {self.failed_call}" if self.failed_call is not None else ""
        return f"{self.reason}{where}: {self.detail}" if self.reason else "ok"


def clean_environment(root: str) -> dict[str, str]:
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": root,
        "TMPDIR": os.path.join(root, "tmp"),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        # Numerical libraries: one thread each (threads would share the CPU limit, and BLAS reserves
        # address space per thread).
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "no_proxy": "*",
    }


def child_sys_path() -> list[str]:
    """This interpreter's import path without the working directory and relative entries."""
    cwd = os.getcwd()
    return [p for p in sys.path if p and os.path.isabs(p) and p != cwd and os.path.exists(p)]


def run_sequences(jobs: Sequence[SequenceJob], functions_dir: str | os.PathLike,
                  limits: SandboxLimits = SandboxLimits()) -> list[SequenceResult]:
    """Run every job in one sandbox process (a new one after a crash or a kill, for the jobs left);
    results in job order. Never raises for what a job does; raises :class:`SandboxError` only if the
    sandbox cannot start at all."""
    if not isinstance(limits, SandboxLimits):  # (a dict of them failed in dataclasses.asdict, naming neither)
        raise TypeError(f"limits must be a SandboxLimits(timeout=..., memory_mb=...), got {type(limits).__name__}")
    functions_dir = os.path.abspath(os.fspath(functions_dir))
    for required in REQUIRED_FILES:
        if not os.path.isfile(os.path.join(functions_dir, required)):
            raise SandboxError(f"{functions_dir} is not a NESTFUL executable_functions folder (no {required})")
    results: list[Optional[SequenceResult]] = [None] * len(jobs)
    with _batch_folder() as root:
        root = os.path.realpath(root)
        os.makedirs(os.path.join(root, "tmp"))
        first = 0
        while first < len(jobs):
            first = _run_child(jobs, first, results, functions_dir, limits, root)
    return results  # type: ignore[return-value]


# The batches' folders: a parent per user in the temporary folder, and in it one folder per run_sequences, named
# after its caller (where its id names it: the machine's boot and the PID namespace; its process id and start
# time). A caller killed outright (SIGKILL, or SIGTERM, which Python does not catch) cannot remove its own; the next
# sandbox started removes the folders of callers that are no longer running, so they do not pile up. Another user's
# are in another parent; a live caller's, its name says so.
FOLDERS = "nestful-sandboxes-{uid}"
_FOLDER_NAME = re.compile(r"([0-9a-f]{32}\.\d+)-(\d+)-(\d+)-[a-z0-9_]+")


def _batch_folder() -> tempfile.TemporaryDirectory:
    """A new folder for a batch's root (removed when the ``with`` ends), after removing those of dead callers."""
    scope, parent = _process_id_scope(), _own_parent()
    started = _start_time(os.getpid()) if scope is not None else None
    if started is None or parent is None:  # no /proc of our own, or a parent we may not trust: no name to go by
        return tempfile.TemporaryDirectory(prefix="nestful-sandbox-")
    try:
        entries = list(os.scandir(parent))
    except OSError:
        entries = []
    for entry in entries:
        match = _FOLDER_NAME.fullmatch(entry.name)
        # (another machine's or PID namespace's process ids mean nothing here: its folders are left to its callers)
        if (match and match[1] == scope and entry.is_dir(follow_symlinks=False)
                and _start_time(int(match[2])) != match[3]):
            _remove_tree(entry.path)
    return tempfile.TemporaryDirectory(prefix=f"{scope}-{os.getpid()}-{started}-", dir=parent)


def _process_id_scope() -> Optional[str]:
    """Where this process's ids name processes, ``<boot id>.<PID namespace>``: the namespace's number alone is the
    same for the first namespace of every machine (a temporary folder shared over NFS), and of every boot. None if
    /proc is not of this namespace: a /proc mounted for another (``unshare --pid`` without ``--mount-proc``, a
    container given the host's) shows other processes under the ids of this namespace's."""
    try:
        if os.readlink("/proc/self") != str(os.getpid()):
            return None
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            boot = f.read().strip().replace("-", "")
        namespace = "".join(filter(str.isdigit, os.readlink("/proc/self/ns/pid")))
    except (OSError, ValueError):
        return None
    return f"{boot}.{namespace}" if re.fullmatch(r"[0-9a-f]{32}", boot) and namespace else None


def _start_time(pid: int) -> Optional[str]:
    """The start time (in clock ticks since boot) of the running process ``pid``, None for none (a zombie has
    ended): it tells a process from a later one given the same id."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rpartition(b")")[2].split()  # (the command name in parentheses may hold ')')
    except OSError:
        return None
    if len(fields) < 20 or fields[0] in (b"Z", b"X"):
        return None
    return fields[19].decode()


def _own_parent() -> Optional[str]:
    """This user's parent of batch folders, made private; None if it is something else (another user's, a link)."""
    parent = os.path.join(tempfile.gettempdir(), FOLDERS.format(uid=os.geteuid()))
    try:
        os.mkdir(parent, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return None
    try:
        info = os.lstat(parent)
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
        return None
    return parent


def _remove_tree(path: str) -> None:
    """Remove a dead caller's batch folder, whatever its samples made read-only (not being root, we cannot empty a
    folder that lost its write permission; its owner can give it back, and only the caller's own: a folder swapped
    for a link is not followed)."""
    if os.geteuid() != 0:
        with contextlib.suppress(OSError):
            os.chmod(path, 0o700)
        for folder, subfolders, _ in os.walk(path):
            for name in subfolders:
                inside = os.path.join(folder, name)
                with contextlib.suppress(OSError):
                    if stat.S_ISDIR(os.lstat(inside).st_mode):
                        os.chmod(inside, 0o700)
    shutil.rmtree(path, ignore_errors=True)


def _run_child(jobs, first, results, functions_dir, limits, root) -> int:
    """One child for ``jobs[first:]``; returns the index of the first job it did not finish."""
    request = {
        "functions_dir": functions_dir, "sys_path": child_sys_path(), "root": root, "first": first, "caller": os.getpid(),
        "limits": {**dataclasses.asdict(limits), "cpu_seconds": limits.cpu_limit}, "log": os.path.join(root, f"child-{first}.log"),
        "samples": [{"calls": j.calls, "output_fields": j.output_fields, "gold": j.gold} for j in jobs[first:]],
    }
    # The request goes out with the stdlib: predictions may hold NaN, which json.loads accepted upstream, and
    # lone surrogates, which UTF-8 cannot encode: ASCII with escapes, which the child's json.loads restores.
    payload = json.dumps(request, ensure_ascii=True).encode("ascii")
    read_fd, write_fd = os.pipe()
    log_path = request["log"]
    with open(log_path, "wb") as log:
        try:
            proc = subprocess.Popen(
                [sys.executable, "-I", "-S", "-B", str(CHILD), str(write_fd)], stdin=subprocess.PIPE,
                stdout=log, stderr=log, pass_fds=(write_fd,), env=clean_environment(root), cwd=root,
                start_new_session=True)
        except OSError as exc:
            os.close(read_fd)
            os.close(write_fd)
            raise SandboxError(f"cannot start the sandbox interpreter {sys.executable}: {exc}") from exc
    os.close(write_fd)
    reader = _EventReader(read_fd)
    isolation, current, started, done = {}, None, 0.0, first
    running = None  # the call of the current sample that last started (the child says so before each call)
    ending = None  # the sample that sent its result, until the child says its process ended
    killed_for, killed_idle = None, False
    try:
        _feed(proc, payload)
        heard = time.monotonic()
        while True:
            if current is not None:
                deadline, longest = started + limits.timeout + limits.grace, _longest_line(jobs[current], limits)
            else:
                deadline, longest = heard + (IDLE_SECONDS if ending is None else ENDING_SECONDS), SMALL_LINE_BYTES
            event = reader.next(deadline, longest)
            if event is _EventReader.TIMEOUT:
                if current is None and done == first:
                    raise SandboxError(f"the sandbox did not start within {IDLE_SECONDS:g} s; log: {_tail(log_path)}")
                # A sample that hangs, a sample's process that does not end after its result, or a child that
                # does not go on after it: kill it; the results it sent stand.
                killed_for, killed_idle = current, current is None
                _kill(proc)
                break
            if event is None:  # the child exited (or closed its channel)
                break
            heard = time.monotonic()
            kind = event.get("event")
            if kind == "fatal" and not isolation and isinstance(event.get("detail"), str):
                raise SandboxError(event["detail"])
            if not isolation:
                if kind != "ready" or not all(isinstance(event.get(k), str) and event[k] for k in ISOLATION):
                    raise _Tampered(f"a {kind!r} event where the sandbox reports how it is set up")
                isolation = {k: event[k] for k in ISOLATION}
            elif kind == "start":
                if (current is not None or ending is not None or event.get("index") != done - first
                        or type(event["index"]) is not int):
                    raise _Tampered(f"a start of sample {event.get('index')!r} out of sequence")
                current, started, running = done, time.monotonic(), None
            elif kind == "call":
                expected = 0 if running is None else running + 1
                calls = jobs[current].calls if current is not None else None
                if (current is None or type(event.get("index")) is not int or event["index"] != expected
                        or not isinstance(calls, list) or expected >= len(calls)):
                    raise _Tampered(f"a start of call {event.get('index')!r} out of sequence")
                running = expected
            elif kind == "result":
                if current is None or event.get("index") != current - first or type(event["index"]) is not int:
                    raise _Tampered(f"a result of sample {event.get('index')!r} out of sequence")
                if not _well_formed_result(event):
                    raise _Tampered("a result that is not one the sandbox writes")
                results[current] = _result(event, isolation)
                current, done, ending = None, current + 1, current
            elif kind == "ended":
                status, log_text = event.get("status"), event.get("log")
                if type(event.get("index")) is not int or type(status) is not int or not isinstance(log_text, str):
                    raise _Tampered("an end of a sample that is not one the sandbox writes")
                if current is not None and event["index"] == current - first:
                    # The sample's process ended without a result: a crash, or the CPU limit.
                    results[current] = _ended(jobs[current], running, status, _one_line(log_text), limits, isolation)
                    current, done = None, current + 1
                elif ending is None or event["index"] != ending - first:
                    raise _Tampered(f"an end of sample {event['index']!r} out of sequence")
                ending = None
                if done == len(jobs):
                    # Every sample ended: the child only exits now (_reap waits for it). No end of file is awaited: a
                    # process a sample left (without kernel isolation) may hold the channel open, for the idle limit.
                    break
            else:
                raise _Tampered(f"a {kind!r} event out of sequence")
    except _Tampered as tampered:
        # Only sample code writes what the child does not: charge the sample that last started in this child.
        _kill(proc)
        reader.close()
        _reap(proc)
        charged = current if current is not None else done - 1
        if charged < first:
            raise SandboxError(f"the sandbox's result channel carried {tampered} before any sample ran") from None
        at = running if charged == current else None
        results[charged] = SequenceResult("crashed", "protocol", _at_call(jobs[charged], at, "the sample wrote to the "
                                          f"sandbox's result channel ({tampered}); the sandbox was killed"),
                                          failed_call=at, **isolation)
        return charged + 1
    except BaseException:  # KeyboardInterrupt, SandboxError...: end the child now, do not wait for its sample
        _kill(proc)
        reader.close()
        _reap(proc)
        raise
    reader.close()
    returncode = _reap(proc)
    if done == len(jobs) or (current is None and ending is not None):
        # Every sample done, or killed after a result whose process did not end (the sample stopped it): that
        # result stands, no sample is charged, the rest run in a fresh child.
        return done
    if current is None:
        if done == first and not isolation:
            raise SandboxError(f"the sandbox exited with status {returncode} before running a sample; "
                               f"log: {_tail(log_path)}")
        current, running = done, None  # died between samples: charge the next one (no call of it started)
    at = running  # the call that started last (None: none had): the failure is that call's
    if killed_idle:
        results[current] = SequenceResult("crashed", "crash", f"the sandbox was silent for {IDLE_SECONDS:g} s "
                                          "before this sample started; killed", **isolation)
    elif killed_for is not None:
        results[current] = SequenceResult(
            "limit", "timeout", _at_call(jobs[current], at, f"killed after {limits.timeout + limits.grace:g} s: the "
                                         f"sample ignored its {limits.timeout:g} s timer"), failed_call=at,
            **_stopped_wins(jobs[current]), **isolation)
    else:
        results[current] = _ended(jobs[current], at, returncode, _tail(log_path), limits, isolation)
    return current + 1


# A native library that cannot allocate ends the process itself, past Python's MemoryError: OpenBLAS reserving
# its buffers while numpy loads ("OpenBLAS error: Memory allocation still failed after 10 retries, giving up."),
# C++ code (std::bad_alloc), C code quoting ENOMEM. Its last words, in the sample's log (emptied before each
# sample), say the memory limit was hit.
_OUT_OF_MEMORY_WORDS = re.compile(r"memory allocation (?:still )?failed|cannot allocate memory|std::bad_alloc",
                                  re.IGNORECASE)


def _ended(job: SequenceJob, at: Optional[int], returncode: int, log: str, limits: SandboxLimits,
           isolation: dict) -> SequenceResult:
    """The result of a sample whose process ended before its result (the sample's own, or the sandbox's)."""
    if returncode == -signal.SIGXCPU:
        return SequenceResult("limit", "timeout", _at_call(job, at, f"CPU limit of {limits.cpu_limit} s (SIGXCPU)"),
                              failed_call=at, **_stopped_wins(job), **isolation)
    if _OUT_OF_MEMORY_WORDS.search(log):
        return SequenceResult("limit", "memory", _at_call(job, at, f"over {limits.memory_mb} MB: the sandbox process "
                                                                   f"{_exit_text(returncode)}; log: {log}"),
                              failed_call=at, **_stopped_wins(job), **isolation)
    return SequenceResult("crashed", "crash", _at_call(job, at, f"the sandbox process {_exit_text(returncode)}; "
                                                                f"log: {log}"), failed_call=at, **isolation)


def _stopped_wins(job: SequenceJob) -> dict:
    """The win checks of a sequence a limit stopped in a way that left the child no check of its own (the CPU limit,
    the kill past its timer, a native library out of memory), as the child checks one its timer or a MemoryError
    stopped: a failed execution, which upstream's check takes for ``False`` (so it wins against a gold 0, 0.0 or
    False) and the corrected one never counts. None without a gold answer (JSON text the child would read)."""
    if job.gold is None:
        return {}
    try:
        gold = json.loads(job.gold)
    except (TypeError, ValueError, RecursionError):
        return {}
    return {"win_upstream": bool(job.calls) and gold == False, "win_corrected": False}  # noqa: E712 (upstream's ==)


def _at_call(job: SequenceJob, index: Optional[int], detail: str) -> str:
    """``detail`` led by the name of the job's call ``index`` (as the child words a call's exception), when known."""
    call = job.calls[index] if index is not None and isinstance(job.calls, list) else None
    name = call.get("name") if isinstance(call, dict) else None
    return f"{name[:200]}: {detail}" if isinstance(name, str) else detail  # (a row's tool name may be any length)


def _feed(proc: subprocess.Popen, payload: bytes) -> None:
    try:
        proc.stdin.write(payload)
        proc.stdin.close()
    except BrokenPipeError:  # the child died while reading; its exit status tells why
        pass


class _Tampered(Exception):
    """The child's result channel carried what the child does not write: sample code wrote to it."""


# The longest line the child writes outside a result (ready, start, call, ended, fatal) is far shorter.
SMALL_LINE_BYTES = 1 << 20
# Characters of the answer's Python repr in a result: child.ANSWER_REPR_CHARS and the words marking a cut one.
ANSWER_REPR_BOUND = 10_000 + 100


def _longest_line(job: SequenceJob, limits: SandboxLimits) -> int:
    """Bytes a result line of ``job`` can take: per call one result of at most ``max_result_chars`` characters
    of JSON (UTF-8: at most 4 bytes each), the answer again, the answer's repr in both, and short fields."""
    calls = len(job.calls) if isinstance(job.calls, list) else 1
    return 4 * limits.max_result_chars * (calls + 1) + 2 * 4 * ANSWER_REPR_BOUND + SMALL_LINE_BYTES


def _well_formed_result(event: dict) -> bool:
    """A result event in the shape the child writes (see ``child.render`` and ``child.run_sample``): an ``ok``
    result names no reason and has its answer; every result and the answer hold a value."""
    win, results, notes, answer = event.get("win"), event.get("results"), event.get("notes"), event.get("answer")
    status, reason = event.get("status"), event.get("reason")
    return (status in STATUSES and (reason is None or reason in REASONS) and (status == "ok") == (reason is None)
            and isinstance(event.get("detail"), str)
            and (event.get("failed_call") is None or type(event.get("failed_call")) is int)
            and isinstance(results, list) and all(_rendered(r) for r in results)
            and (answer is None or _rendered(answer)) and (status != "ok" or answer is not None)
            and isinstance(win, dict) and all(win.get(k) is None or type(win.get(k)) is bool
                                              for k in ("upstream", "corrected"))
            and isinstance(notes, list) and all(isinstance(n, str) for n in notes))


def _rendered(entry: Any) -> bool:
    return (isinstance(entry, dict) and "value" in entry
            and all(entry.get(k) is None or isinstance(entry.get(k), str)
                    for k in ("python_type", "type_name", "python_repr")))


def _result(event: dict, isolation: dict) -> SequenceResult:
    win = event.get("win") or {}
    return SequenceResult(status=event["status"], reason=event.get("reason"), detail=event.get("detail", ""),
                          failed_call=event.get("failed_call"), results=event.get("results", []),
                          answer=event.get("answer"), win_upstream=win.get("upstream"),
                          win_corrected=win.get("corrected"), notes=event.get("notes", []), **isolation)


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _reap(proc: subprocess.Popen) -> int:
    """Wait for a child that ended its batch (or was killed), then kill what is left of its process group."""
    try:
        returncode = proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        _kill(proc)
        returncode = proc.wait()
    _kill(proc)  # anything the sample left behind in the child's process group
    _end_batch_user(proc.pid)
    return returncode


# A root caller's samples run as a user of the batch's own: this plus the child's process id (child.BATCH_IDS).
BATCH_IDS = 0x70000000


def _end_batch_user(child_pid: int) -> None:
    """As root, end every process of the batch's own user (see ``child.leave_root``). Without a PID namespace the
    worker ends what each sample leaves, as that user, after the sample; a sample killed for its time never gets
    there, and a process it started in a session of its own (out of the child's process group) ran on past the
    batch. No process outside the batch has that user."""
    if os.geteuid() != 0:
        return
    uid = BATCH_IDS + child_pid
    deadline = time.monotonic() + 2.0  # (those killed go at once; a process still forking is killed again)
    while (left := _processes_of(uid)) and time.monotonic() < deadline:
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.01)


def _processes_of(uid: int) -> list[int]:
    """The running (not zombie) processes whose real user is ``uid``."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status", "rb") as f:
                status = dict(line.split(b":", 1) for line in f.read().splitlines() if b":" in line)
        except OSError:  # gone meanwhile
            continue
        if int(status.get(b"Uid", b"-1 ").split()[0]) == uid and not status.get(b"State", b"").strip().startswith(b"Z"):
            found.append(int(name))
    return found


def _exit_text(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with status {returncode}"


def _tail(path: str, size: int = 600) -> str:
    """The end of a child's log on one line (lines joined by ``|``): it goes into one-line errors and details."""
    try:
        data = Path(path).read_bytes()[-size:]
    except OSError:
        return "(no log)"
    return _one_line(data.decode("utf-8", "replace"))


def _one_line(text: str) -> str:
    lines = (line.strip() for line in text.splitlines())
    return " | ".join(line for line in lines if line) or "(empty)"


class _EventReader:
    """JSON objects, one a line, from the child's result pipe, until a deadline (absolute, on the monotonic
    clock: a child that dribbles bytes does not push it back). Raises :class:`_Tampered` for a line that is
    not a JSON object or is longer than allowed."""

    TIMEOUT = object()

    def __init__(self, fd: int):
        self.fd = fd
        self.buffer = bytearray()
        self.scanned = 0  # bytes of the buffer known to hold no end of line
        self.eof = False
        # poll, not select: select refuses a descriptor numbered 1024 or more (a caller with many files open)
        self.poller = select.poll()
        self.poller.register(fd, select.POLLIN)

    def next(self, deadline: float, longest: int):
        while (end := self.buffer.find(b"\n", self.scanned)) < 0:
            self.scanned = len(self.buffer)  # searched once: a long line is not searched again chunk by chunk
            if len(self.buffer) > longest:
                raise _Tampered(f"a line longer than {longest} bytes")
            if self.eof:
                return None  # an unfinished line: the child died while writing; its exit status tells why
            timeout = deadline - time.monotonic()
            if timeout <= 0:
                return self.TIMEOUT
            # (in steps of at most a minute: poll takes milliseconds as a C int, about 24 days)
            if not self.poller.poll(max(1, int(min(timeout, 60.0) * 1000))):
                continue
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                self.eof = True
                continue
            self.buffer += chunk
        line = bytes(self.buffer[:end])
        del self.buffer[:end + 1]
        self.scanned = 0
        if len(line) > longest:
            raise _Tampered(f"a line longer than {longest} bytes")
        try:
            event = loads(line)
        except (ValueError, TypeError, RecursionError) as exc:
            raise _Tampered(f"a line that is not JSON: {str(exc)[:100]}") from None
        if not isinstance(event, dict):
            raise _Tampered("a line that is not a JSON object")
        return event

    def close(self) -> None:
        os.close(self.fd)
