"""The sandboxed side of NESTFUL execution. Runs as ``python -I -S -B child.py RESULT_FD`` in a fresh
interpreter started by :mod:`.sandbox`; never imported by the package.

Standard library only, on purpose: importing ``tooluse_datasets`` here would pull in datasets and pyarrow
(1.2 s and 1.4 GB of address space before any upstream code runs, which the memory limit would have to
allow for). The parent decodes what this writes with ``tooluse_datasets.codec.loads``; values are written
with the stdlib's exact encoder (shortest round-trip floats, integers of any size, no NaN).

Protocol: the parent writes one JSON request on stdin (functions folder, import path, limits, samples);
this process answers on file descriptor RESULT_FD with one JSON object per line: ``ready`` (how the
sandbox was set up), then for each sample ``start``, ``call`` before each call runs (so the parent knows
which sample and call a crash or hang belongs to), ``result``, and ``ended`` (how the sample's process
ended: a sample without a result crashed). stdout/stderr go to a log file the parent owns.

Processes: this process reads the request, isolates itself (:func:`isolate`: namespaces, a read-only file
system but the sample area) and, with a new PID namespace, forks a reaper (PID 1 there) that forks the
worker (:func:`enter_pid_namespace`); only the worker keeps RESULT_FD, becomes another user when root
(:func:`leave_root`), drops its capabilities, installs the audit hook and runs each sample in a process of its
own, forked from it (:func:`run_forked`): what a sample changes in the interpreter ends with it. Without a PID
namespace this process is the worker.

What a sample runs is the official executor's semantics (spec section 9): for each call, the tool's
``output_parameters`` keys (exactly one), arguments positionally in key order with ``$label.field$``
references substituted, the function from ``basic_functions.py`` if defined there, else the file named in
``func_file_map.json`` (each call executes its module afresh, as upstream does); the answer is the last
call's result. Any failure is a failure of the whole sequence.
"""
import contextlib
import errno
import functools
import importlib.util
import json
import math
import os
import resource
import shutil
import signal
import sys
import tempfile
import threading
import time

# -- reasons (mirrored in sandbox.REASONS, which documents them) -------------------------------------------
NETWORK, SUBPROCESS, WRITE, SIGNAL = "network", "subprocess", "write_outside_workdir", "signal"
TIMEOUT, MEMORY = "timeout", "memory"
NO_CALLS, MALFORMED, UNKNOWN_TOOL, NO_OUTPUTS = "no_calls", "malformed_call", "unknown_tool", "no_output_parameters"
BAD_REFERENCE, UNKNOWN_FUNCTION, IMPORT_ERROR = "bad_reference", "unknown_function", "import_error"
EXCEPTION, MULTIPLE_OUTPUTS, TOO_LARGE = "exception", "multiple_outputs", "result_too_large"

_NETWORK_EVENTS = frozenset({
    "socket.__new__", "socket.bind", "socket.connect", "socket.getaddrinfo", "socket.gethostbyname",
    "socket.gethostbyname_ex", "socket.gethostbyaddr", "socket.getnameinfo", "socket.sendto", "socket.sendmsg",
    "urllib.Request", "http.client.connect", "ftplib.connect", "smtplib.connect", "poplib.connect",
    "imaplib.open", "nntplib.connect", "telnetlib.Telnet.open", "webbrowser.open",
})
_PROCESS_EVENTS = frozenset({
    "subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty",
    "pty.spawn", "os.startfile",
})
# Events whose path arguments (by position) create, change or delete files. (os.link's source too: a hard link
# in the work folder to a file outside it would let that file be overwritten.)
_PATH_EVENTS = {
    "os.remove": (0,), "os.rmdir": (0,), "os.mkdir": (0,), "os.rename": (0, 1), "os.link": (0, 1),
    "os.symlink": (1,), "os.truncate": (0,), "os.chmod": (0,), "os.chown": (0,), "os.utime": (0,),
    "os.chflags": (0,), "os.lchflags": (0,), "os.setxattr": (0,), "os.removexattr": (0,),
    "shutil.rmtree": (0,), "shutil.copyfile": (1,), "shutil.copymode": (1,), "shutil.copystat": (1,),
    "shutil.copytree": (1,), "shutil.move": (0, 1), "shutil.chown": (0,), "shutil.make_archive": (0,),
    "tempfile.mkstemp": (0,), "tempfile.mkdtemp": (0,),
}
# Position of the dir_fd argument a relative path of those events is resolved against (the "open" event
# does not carry its dir_fd: the kernel's read-only file system is the barrier there).
_DIR_FDS = {
    "os.remove": {0: 1}, "os.rmdir": {0: 1}, "os.mkdir": {0: 2}, "os.rename": {0: 2, 1: 3},
    "os.link": {0: 2, 1: 3}, "os.symlink": {1: 2}, "os.chmod": {0: 2}, "os.chown": {0: 3}, "os.utime": {0: 3},
}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC


class Refused(PermissionError):
    """Raised inside upstream code for an operation the sandbox does not allow. A PermissionError, so library
    code reacts as to an OS refusal; the refusal is also recorded, so swallowing it does not hide it."""


class SampleTimeout(BaseException):
    """The per-sample wall-clock limit (a BaseException: ``except Exception`` in upstream code does not
    catch it; a bare ``except:`` does, which is why the parent also keeps a watchdog)."""


class StepFailure(Exception):
    def __init__(self, reason, detail, call_index=None):
        super().__init__(detail)
        self.reason, self.detail, self.call_index = reason, detail, call_index


class Policy:
    """The audit hook: refuses network, processes, signals to other processes, and writes outside the
    sample's work root; every refusal is remembered for the running sample. It names what a sample tried; it
    is not a barrier on its own: it lives in the sample's process, where code can reach it (``gc``) and
    switch it off, and it sees only what raises audit events. The kernel's isolation (:func:`isolate`) is."""

    def __init__(self, allowed_roots):
        self.allow(allowed_roots)
        self.violations = []
        self._thread = threading.local()  # the check's own events are not checked: per thread, since
        # upstream code may start threads whose events must not pass while another thread's check runs

    def allow(self, roots):
        self.allowed = tuple(os.path.realpath(r) for r in roots)

    @contextlib.contextmanager
    def unchecked(self):
        """The sandbox's own steps on this thread (other threads stay checked)."""
        self._thread.busy = True
        try:
            yield
        finally:
            self._thread.busy = False

    def __call__(self, event, args):
        if getattr(self._thread, "busy", False):
            return
        self._thread.busy = True
        try:
            refusal = self.check(event, args)
        finally:
            self._thread.busy = False
        if refusal is not None:
            self.violations.append(refusal)
            raise Refused(f"sandbox: {refusal[1]}")

    def check(self, event, args):
        if event in _NETWORK_EVENTS:
            return NETWORK, f"network access refused ({event})"
        if event in _PROCESS_EVENTS:
            return SUBPROCESS, f"starting a process refused ({event})"
        if event in ("os.kill", "os.killpg", "signal.pthread_kill") and args and args[0] not in (os.getpid(), 0):
            return SIGNAL, f"signalling another process refused ({event} {args[0]})"
        if event == "open":
            path, mode, flags = (tuple(args) + (None, None, None))[:3]
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & _WRITE_FLAGS)
            if writing and not isinstance(path, int) and not self.inside(path):
                return WRITE, f"writing {_show(path)} refused: outside the sample's work folder"
            return None
        if event == "sqlite3.connect":
            db = args[0] if args else None
            path = _database_path(db) if isinstance(db, (str, bytes, os.PathLike)) else ":memory:"
            if path != ":memory:" and not self.inside(path):
                return WRITE, f"opening database {_show(db)} refused: outside the sample's work folder"
            return None
        positions = _PATH_EVENTS.get(event)
        if positions:
            dir_fds = _DIR_FDS.get(event, {})
            for p in positions:
                path = args[p] if len(args) > p else None
                if isinstance(path, int):
                    # A descriptor (os.fchmod, os.fchown, os.utime(fd), os.ftruncate): a file opened for reading
                    # outside may not be changed through it; the file it names is checked.
                    target = _descriptor_target(path)
                    if target is None or not self.inside(target):
                        return WRITE, (f"{event} on descriptor {path} ({_show(target) if target else 'no file'}) "
                                       f"refused: outside the sample's work folder")
                    continue
                dir_fd = args[dir_fds[p]] if p in dir_fds and len(args) > dir_fds[p] else None
                if path is not None and not self.inside(path, dir_fd):
                    return WRITE, f"{event} on {_show(path)} refused: outside the sample's work folder"
        return None

    def inside(self, path, dir_fd=None):
        try:
            text = os.fsdecode(path)
        except TypeError:
            return False
        if text in (os.devnull,):
            return True
        base = os.getcwd()
        # (-1: no dir_fd given, as the os functions' events say it; a relative path is then the working folder's)
        if isinstance(dir_fd, int) and dir_fd >= 0 and not os.path.isabs(text):
            try:
                base = os.readlink(f"/proc/self/fd/{dir_fd}")
            except OSError:
                return False
        real = os.path.realpath(os.path.join(base, text))
        return any(real == root or real.startswith(root + os.sep) for root in self.allowed)


def _descriptor_target(fd):
    """The absolute path an open descriptor names, or None (a pipe, a socket, an anonymous file, no such fd)."""
    try:
        target = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None
    return target if target.startswith("/") else None


def _database_path(db):
    """The file an sqlite3 database name opens: a ``file:`` URI's path (``uri=True``; the event does not say
    whether it was given, so a name that looks like one is read as one), else the name."""
    text = os.fsdecode(db)
    if not text.startswith("file:"):
        return text
    path = text[len("file:"):].split("?", 1)[0].split("#", 1)[0]
    if path.startswith("//"):  # file://host/path
        path = "/" + path[2:].partition("/")[2]
    if path in ("", ":memory:"):
        return ":memory:"
    import urllib.parse

    return urllib.parse.unquote(path)


def _show(path):
    try:
        return repr(os.fsdecode(path))[:200]
    except TypeError:
        return repr(path)[:200]


# -- isolation ---------------------------------------------------------------------------------------------


_CLONE_NEWNS, _CLONE_NEWIPC, _CLONE_NEWUSER = 0x00020000, 0x08000000, 0x10000000
_CLONE_NEWPID, _CLONE_NEWNET = 0x20000000, 0x40000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REMOUNT = 1, 2, 4, 8, 32
_MS_NOATIME, _MS_NODIRATIME, _MS_BIND, _MS_REC, _MS_PRIVATE, _MS_RELATIME = 1024, 2048, 4096, 16384, 1 << 18, 1 << 21
# Per-mount options of /proc/self/mountinfo a remount must keep (in a user namespace they are locked).
_MOUNT_OPTIONS = {b"nosuid": _MS_NOSUID, b"nodev": _MS_NODEV, b"noexec": _MS_NOEXEC, b"noatime": _MS_NOATIME,
                  b"nodiratime": _MS_NODIRATIME, b"relatime": _MS_RELATIME}
READ_ONLY = "read-only"  # the file system status when everything but the sample area is read-only
# The device files a sample may open. A read-only mount stops writes to files, not to devices (a disk, the
# kernel's log): every other device file, on every mount, is refused (nodev).
_HARMLESS_DEVICES = (b"/dev/null", b"/dev/zero", b"/dev/full", b"/dev/random", b"/dev/urandom", b"/dev/tty")


@functools.lru_cache(maxsize=None)  # loaded once: each sample's process asks for it again (_die_with_parent)
def _libc():
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
    return ctypes, libc


def _errno_text(ctypes):
    return os.strerror(ctypes.get_errno())


def isolate(network_mode, kernel_mode, work, disk_mb):
    """Kernel isolation of this process, as far as the kernel allows: one ``unshare`` into new network, mount,
    IPC and PID namespaces (and a user namespace when not root, mapping our own uid/gid); then every mount made
    read-only except ``work`` (the batch's sample area, a tmpfs of ``disk_mb``). The PID namespace takes effect for the children
    forked next (:func:`enter_pid_namespace`). ``None``: try and fall back; ``False``: do not try.

    Returns ``(status, pid_namespace)``: ``status`` maps ``network``, ``filesystem`` and ``processes`` to
    "namespace"/"read-only", "off" or "unavailable: why"."""
    status = {"network": "off" if network_mode is False else "",
              "filesystem": "off" if kernel_mode is False else "",
              "processes": "off" if kernel_mode is False else ""}
    want_net, want_kernel = network_mode is not False, kernel_mode is not False
    if not (want_net or want_kernel):
        return status, False
    try:
        ctypes, libc = _libc()
    except Exception as exc:  # no ctypes: the audit hook is the only barrier
        why = f"unavailable: {type(exc).__name__}: {exc}"
        return {k: v or why for k, v in status.items()}, False
    uid, gid = os.geteuid(), os.getegid()
    user = 0 if uid == 0 else _CLONE_NEWUSER
    if user:
        unusable = _user_namespace_unusable(ctypes, libc, uid, gid)
        if unusable:
            return {k: v or f"unavailable: {unusable}" for k, v in status.items()}, False
    attempts = []
    if want_kernel:
        # (IPC too: System V segments and POSIX message queues outlive their processes; in the caller's IPC
        # namespace they would hold memory past the batch and carry data between samples and batches)
        attempts.append((_CLONE_NEWNS | _CLONE_NEWPID | _CLONE_NEWIPC | (_CLONE_NEWNET if want_net else 0), True))
    if want_net:
        attempts.append((_CLONE_NEWNET, False))  # the network alone, as a fallback
    kernel_done, failure = False, ""
    for flags, kernel in attempts:
        if libc.unshare(flags | user) == 0:
            kernel_done = kernel
            if flags & _CLONE_NEWNET:
                status["network"] = "namespace"
            break
        failure = f"unavailable: unshare failed ({_errno_text(ctypes)})"
        if kernel:
            status["filesystem"] = status["processes"] = failure
    else:
        return {k: v or failure for k, v in status.items()}, False
    try:
        if user:
            _map_own_ids(uid, gid)
    except OSError as exc:
        why = f"unavailable: cannot map the user namespace ({exc})"
        return {k: v if v in ("off", "namespace") else why for k, v in status.items()}, False
    if not kernel_done:
        return {k: v or failure for k, v in status.items()}, False
    status["processes"] = "namespace"
    status["filesystem"] = _read_only_except(ctypes, libc, work, disk_mb)
    return status, True


def _map_own_ids(uid, gid):
    """Keep our own uid/gid inside the new user namespace, so files are accessed as before."""
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)


def _user_namespace_unusable(ctypes, libc, uid, gid):
    """Why a user namespace of our own cannot be made and mapped here ("" if it can), tried in a forked
    child: a process that unshares one and then cannot map its ids (e.g. where AppArmor denies unprivileged
    user namespaces their capabilities, as Ubuntu does by default) cannot leave it, and with unmapped ids
    creates no file."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        why = ""
        try:
            if libc.unshare(_CLONE_NEWUSER) != 0:
                why = f"unshare failed ({_errno_text(ctypes)})"
            else:
                _map_own_ids(uid, gid)
        except BaseException as exc:
            why = f"cannot map the user namespace ({exc})"
        os.write(write_fd, why.encode("utf-8", "replace"))
        os._exit(0)
    os.close(write_fd)
    chunks = []
    while True:
        chunk = os.read(read_fd, 4096)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(read_fd)
    os.waitpid(pid, 0)
    return b"".join(chunks).decode("utf-8", "replace")


def _mounts():
    """(mount point, per-mount options) of every line of /proc/self/mountinfo, paths unescaped."""
    unescape = lambda m: bytes([int(m.group(1), 8)])  # noqa: E731
    import re

    with open("/proc/self/mountinfo", "rb") as f:
        for line in f:
            fields = line.split(b" ")
            yield re.sub(rb"\\([0-7]{3})", unescape, fields[4]), set(fields[5].split(b","))


def _read_only_except(ctypes, libc, work, disk_mb):
    """Every mount point read-only but ``work``, a new tmpfs of ``disk_mb`` megabytes (what the samples of a
    batch may write in all; it ends with the namespace, leaving nothing behind), and without devices but the
    harmless ones (``_HARMLESS_DEVICES``). Returns the filesystem status;
    checked by writing: outside ``work`` a new file must fail with EROFS, inside it must succeed."""
    work_b = os.fsencode(os.path.realpath(work))
    if libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:  # nothing we mount leaks out
        return f"unavailable: cannot make mounts private ({_errno_text(ctypes)})"
    size = f"size={int(disk_mb)}m,mode=0700".encode()
    if libc.mount(b"tmpfs", work_b, b"tmpfs", _MS_NOSUID | _MS_NODEV, size) != 0:
        return f"unavailable: cannot mount the sample area ({_errno_text(ctypes)})"
    global _SAMPLE_AREA_MB
    _SAMPLE_AREA_MB = int(disk_mb)
    # Each harmless device a mount of its own (bound onto itself), which alone keeps devices usable.
    devices = {d for d in _HARMLESS_DEVICES if os.path.exists(d) and libc.mount(d, d, None, _MS_BIND, None) == 0}
    failed = []
    for point, options in _mounts():
        if point == work_b:
            continue
        flags = _MS_REMOUNT | _MS_BIND | _MS_RDONLY | (0 if point in devices else _MS_NODEV)
        for name, flag in _MOUNT_OPTIONS.items():
            if name in options:
                flags |= flag
        if libc.mount(None, point, None, flags, None) != 0:
            err = ctypes.get_errno()
            if err in (errno.ENOENT, errno.EACCES):  # not reachable by path (deleted, or hidden from us)
                continue
            failed.append(f"{os.fsdecode(point)}: {os.strerror(err)}")
    if failed:
        return f"partial: {len(failed)} mount(s) stay writable ({'; '.join(failed[:3])})"
    return _check_read_only(work)


def _check_read_only(work):
    outside = os.path.join(os.path.dirname(os.path.realpath(work)), f".probe-{os.getpid()}")
    try:
        os.close(os.open(outside, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except OSError as exc:
        if exc.errno != errno.EROFS:
            return f"unavailable: probing the file system gave {exc}"
    else:
        os.remove(outside)
        return "unavailable: the file system stayed writable"
    inside = os.path.join(work, f".probe-{os.getpid()}")
    try:
        os.close(os.open(inside, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        os.remove(inside)
    except OSError as exc:
        return f"unavailable: the sample area is not writable ({exc})"
    return READ_ONLY


def _die_with_parent():
    try:
        ctypes, libc = _libc()
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def enter_pid_namespace(channel_fd):
    """After ``unshare(CLONE_NEWPID)``: fork a reaper, PID 1 of the new namespace, which forks the worker and
    waits for it. Returns in the worker only. When the reaper exits (the worker ended, or the parent killed
    the process group), the kernel kills every process left in the namespace, setsid or not.

    The worker's end is passed up: this process (the one the parent started) exits with the worker's status,
    or re-raises the signal that ended it (SIGXCPU for the CPU limit, SIGSEGV...). PID 1 cannot do so itself
    (the kernel ignores signals without a handler sent to it from inside its namespace, its own included), so
    the reaper reports a signal on a pipe. The worker is not PID 1 for the same reason: its timer and the
    kernel's SIGXCPU must work as in a plain process."""
    sys.stdout.flush()
    sys.stderr.flush()
    report_r, report_w = os.pipe()
    reaper = os.fork()
    if reaper == 0:
        os.close(report_r)
        _die_with_parent()
        worker = os.fork()
        if worker == 0:
            os.close(report_w)
            _die_with_parent()
            return
        os.close(channel_fd)
        while True:  # PID 1 adopts orphans: reap them, until the worker ends
            pid, wait_status = os.waitpid(-1, 0)
            if pid == worker:
                break
        if os.WIFSIGNALED(wait_status):
            os.write(report_w, b"%d" % os.WTERMSIG(wait_status))
            os._exit(1)
        os._exit(os.WEXITSTATUS(wait_status) if os.WIFEXITED(wait_status) else 1)
    os.close(report_w)
    os.close(channel_fd)
    _, wait_status = os.waitpid(reaper, 0)
    reported = b""
    while True:
        chunk = os.read(report_r, 16)
        if not chunk:
            break
        reported += chunk
    if reported:
        _exit_by_signal(int(reported))
    if os.WIFSIGNALED(wait_status):
        _exit_by_signal(os.WTERMSIG(wait_status))
    os._exit(os.WEXITSTATUS(wait_status) if os.WIFEXITED(wait_status) else 1)


def mount_own_proc():
    """In the batch's PID namespace, before the capabilities go: a /proc of that namespace over the caller's, so a
    sample sees the batch's processes alone, not every process of the machine (command lines that may carry a
    token; for a caller that is not root, its own user's environments). Read-only, as the rest. Where the kernel
    refuses (a container masking parts of /proc), the caller's stays, as before."""
    try:
        ctypes, libc = _libc()
        return libc.mount(b"proc", b"/proc", b"proc", _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, None) == 0
    except Exception:
        return False


def _exit_by_signal(signum):
    try:
        signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signum])
        os.kill(os.getpid(), signum)
    except (OSError, ValueError):
        pass
    os._exit(128 + signum)  # a signal whose default action does not end a process


def drop_capabilities(keep=0):
    """No new privileges (setuid binaries do not grant any), a capability bounding set of ``keep`` only, and
    effective/permitted sets of ``keep`` (inheritable and ambient empty): sample code cannot remount, enter other
    namespaces, override file permissions or go back to root. Returns "" when the effective and permitted sets
    are exactly ``keep`` afterwards, else why not."""
    try:
        ctypes, libc = _libc()
        libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
        _drop_bounding_set(libc, keep)
        libc.prctl(47, 4, 0, 0, 0)  # PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL

        class Header(ctypes.Structure):
            _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

        class Data(ctypes.Structure):
            _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                        ("inheritable", ctypes.c_uint32)]

        header, data = Header(0x20080522, 0), (Data * 2)()  # _LINUX_CAPABILITY_VERSION_3: two 32-bit words
        for word in range(2):
            data[word].effective = data[word].permitted = (keep >> (32 * word)) & 0xFFFFFFFF
        if libc.capset(ctypes.byref(header), data) != 0:
            return f"capset failed ({_errno_text(ctypes)})"
        with open("/proc/self/status") as f:
            held = [line.split()[1] for line in f if line.startswith(("CapEff:", "CapPrm:"))]
        if any(int(h, 16) != keep for h in held):
            return "capabilities remain after capset"
        return ""
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"


def _drop_bounding_set(libc, keep):
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            last = int(f.read())
    except (OSError, ValueError):
        last = 63
    for cap in range(last + 1):
        if not keep >> cap & 1:
            libc.prctl(24, cap, 0, 0, 0)  # PR_CAPBSET_DROP (needs CAP_SETPCAP: without it there is little to drop)


# What a sample that no longer runs as root keeps: reading files and searching folders whatever their permissions
# (CAP_DAC_READ_SEARCH), as root did: the functions folder and the interpreter's packages may be where only root
# reads (/root/.cache, a venv under /root). Writing, signalling, and the exemption from RLIMIT_NPROC are gone.
READ_ANYWHERE = 1 << 2
# The ids a sample runs as when the caller is root, tried in turn: first one of the batch's own (this base plus the
# child's process id, in 0x70000000-0x7fffffff, which no distribution or systemd hands out), which no process
# outside the batch has, so RLIMIT_NPROC counts the batch's tasks alone; then nobody, for a user namespace that
# maps few ids (a rootless container).
BATCH_IDS, NOBODY = 0x70000000, 65534


def leave_root(candidates, work):
    """As root, with what needs root done (namespaces, mounts, the sample area): become the first of ``candidates``
    (uid = gid, no supplementary groups) that the user namespace maps, owning ``work``, the sample area; keep
    every capability for now (:func:`drop_capabilities` keeps ``READ_ANYWHERE`` alone), and the bounding set
    only that. Returns ``(uid, "")``, or ``(None, why)`` still root as before."""
    try:
        ctypes, libc = _libc()
    except Exception as exc:
        return None, f"{type(exc).__name__}: {exc}"
    _drop_bounding_set(libc, READ_ANYWHERE)
    failures = []
    for uid in candidates:
        try:
            os.chown(work, uid, uid)
            os.chmod(work, 0o700)
        except OSError as exc:
            failures.append(f"uid {uid}: {exc.strerror}")
            continue
        libc.prctl(8, 1, 0, 0, 0)  # PR_SET_KEEPCAPS: the permitted set outlives setuid (cleared below)
        try:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
        except OSError as exc:
            failures.append(f"uid {uid}: {exc.strerror}")
            with contextlib.suppress(OSError):
                os.setresgid(0, 0, 0)
                os.chown(work, 0, 0)
            continue
        finally:
            libc.prctl(8, 0, 0, 0, 0)
        if os.getresuid() != (uid,) * 3 or os.getresgid() != (uid,) * 3 or os.getgroups():
            return None, f"ids after setuid {os.getresuid()}/{os.getresgid()}"
        return uid, ""
    return None, f"no other user to run as ({'; '.join(failures)})"


def root_regained():
    """Whether this process can become root again (after :func:`drop_capabilities`, it must not)."""
    try:
        os.setresuid(0, 0, 0)
    except PermissionError:
        return False
    return True


# Processes and threads (tasks) the batch's user namespace may hold: the child, the reaper, the worker and a
# sample's process, plus what a sample starts (for a root caller, the batch's user: the worker, the sample's
# process and what it starts). Forks through native code (ctypes' libc.fork) raise no audit
# event; this bounds them while the sample runs, the PID namespace ends them after it.
MAX_TASKS = 64


def set_limits(limits, limit_tasks=False):
    def lower(kind, value):
        soft, hard = resource.getrlimit(kind)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(kind, (value, value if hard == resource.RLIM_INFINITY else hard))

    lower(resource.RLIMIT_CORE, 0)  # a segfaulting sample leaves no core file
    lower(resource.RLIMIT_AS, int(limits["memory_mb"]) << 20)
    lower(resource.RLIMIT_FSIZE, int(limits["file_size_mb"]) << 20)
    lower(resource.RLIMIT_NOFILE, 256)
    if limit_tasks:
        # Counted per user in each user namespace: in the batch's own, or for the batch's own uid (see leave_root),
        # the batch's tasks only (otherwise every process of the user on the machine). The kernel does not apply it
        # to root (uid 0 of the machine), which is why a root caller's samples run as another user.
        lower(resource.RLIMIT_NPROC, MAX_TASKS)


def cpu_budget(seconds):
    """Let the next sample use ``seconds`` more CPU time; past it the kernel sends SIGXCPU, whose default
    action ends this process (the parent reports ``timeout`` with the CPU as cause)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    soft = int(math.ceil(usage.ru_utime + usage.ru_stime)) + int(seconds)
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


# -- the executor (spec section 9) ------------------------------------------------------------------------


class Functions:
    def __init__(self, folder):
        self.folder = folder
        self.basic_file = "basic_functions.py"
        # Upstream lists basic functions from the lines of basic_functions.py that start with "def ".
        self.basic = []
        with open(os.path.join(folder, self.basic_file), encoding="utf-8") as f:
            for line in f:
                if line.startswith("def "):
                    head = line.strip().replace("def ", "")
                    self.basic.append(head[:head.index("(")] if "(" in head else head)
        with open(os.path.join(folder, "func_file_map.json"), encoding="utf-8") as f:
            self.file_map = json.load(f)

    def load(self, name, call_index):
        try:
            file_name = self.basic_file if name in self.basic else self.file_map[name]
        except (KeyError, TypeError):
            raise StepFailure(UNKNOWN_FUNCTION, f"no executable function {name!r}", call_index) from None
        path = os.path.join(self.folder, file_name)
        try:
            # A fresh module per call, registered under its file name, as the official executor does.
            spec = importlib.util.spec_from_file_location(file_name, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[file_name] = module
            spec.loader.exec_module(module)
        except SampleTimeout:
            raise
        except BaseException as exc:
            if _read_only(exc):
                raise StepFailure(WRITE, f"loading {file_name}: {_describe(exc)}", call_index) from None
            cause = _out_of_memory(exc)
            if cause is not None:
                # The memory limit, hit while the module ran its top level (or loaded a C extension it imports):
                # a limit like a sample's MemoryError, not a module that cannot load.
                said = _describe(cause) if str(cause) else type(cause).__name__
                raise StepFailure(MEMORY, f"while loading {file_name} ({said})", call_index) from None
            raise StepFailure(IMPORT_ERROR, f"loading {file_name}: {_describe(exc)}", call_index) from None
        try:
            return getattr(module, name)
        except (AttributeError, TypeError):
            raise StepFailure(UNKNOWN_FUNCTION, f"{file_name} defines no {name!r}", call_index) from None


# What the dynamic loader says when mapping a C extension or its libraries fails for want of address space
# (RLIMIT_AS), as ImportError's message: "libopenblas.so: failed to map segment from shared object". (Not "cannot
# allocate memory in static TLS block": that is a fixed table of the loader, full whatever the limit.)
_LOADER_OUT_OF_MEMORY = ("failed to map segment from shared object", "cannot allocate memory")


def _out_of_memory(exc):
    """The error that says ``exc`` is the memory limit: the earliest of ``exc`` and the errors it was raised from
    (a library wrapping its failure in an ImportError, as pandas does with numpy's) that is a MemoryError,
    ENOMEM, or the loader's words for it; None when none is."""
    found, seen = None, set()
    while exc is not None and id(exc) not in seen and len(seen) < 50:
        seen.add(id(exc))
        if isinstance(exc, MemoryError) or (isinstance(exc, OSError) and exc.errno == errno.ENOMEM):
            found = exc
        elif isinstance(exc, ImportError):
            text = str(exc).lower()
            if "static tls" not in text and any(words in text for words in _LOADER_OUT_OF_MEMORY):
                found = exc
        exc = exc.__cause__ or exc.__context__
    return found  # (the first cause: what a wrapping library's message quotes, said plainly)


def resolve(value, env, call_index):
    """A reference ``$label.field$`` (or upstream's tolerated ``$label.field`` without the closing ``$``)
    becomes the producer's result; anything else is literal. (``specs.executor_reference`` reads values the same
    way for the validation rule: keep the two alike.)"""
    if type(value) is not str:
        return value
    if value.startswith("$") and value.endswith("$"):
        inner = value[1:-1]
    elif value.startswith("$var"):
        inner = value[1:]
    else:
        return value
    label, dot, field = inner.partition(".")
    if not dot:
        raise StepFailure(BAD_REFERENCE, f"{value!r} names no output field", call_index)
    try:
        return env[label][field]
    except (KeyError, TypeError):
        raise StepFailure(BAD_REFERENCE, f"{value!r}: no earlier call {label!r} with output {field!r}",
                          call_index) from None


def written(value, call_index):
    """``value``, once upstream's executor could write it with ``str()``, as it does every argument before the
    call: an integer past Python's int -> str limit (4,300 digits, computed by a runaway prediction) fails the
    sequence there, as it does upstream."""
    try:
        str(value)
    except MemoryError:
        raise
    except Exception as exc:
        raise StepFailure(EXCEPTION, f"an argument cannot be written as text: {_describe(exc)}", call_index) from None
    return value


def execute(calls, output_fields, functions, trace, max_chars, on_call=lambda index: None):
    """Run ``calls``; ``on_call(i)`` is told before call ``i`` loads its module and runs (a crash or kill then
    leaves no result of ours, and the parent still knows which call it was)."""
    if not isinstance(calls, list):
        raise StepFailure(MALFORMED, f"the calls are a JSON {type(calls).__name__}, not a list")
    env = {}
    for i, call in enumerate(calls):
        if not isinstance(call, dict) or "label" not in call or "name" not in call or "arguments" not in call:
            raise StepFailure(MALFORMED, "a call needs 'name', 'label' and 'arguments'", i)
        if not isinstance(call["label"], str):
            raise StepFailure(MALFORMED, "label is not a string", i)
        label, name, arguments = call["label"].replace("$", ""), call["name"], call["arguments"]
        if not isinstance(name, str) or name not in output_fields:
            raise StepFailure(UNKNOWN_TOOL, f"{name!r} is not in the row's tools", i)
        fields = output_fields[name]
        if fields is None:
            raise StepFailure(NO_OUTPUTS, f"tool {name!r} has no output_parameters", i)
        if not isinstance(arguments, dict):
            raise StepFailure(MALFORMED, "arguments is not an object", i)
        values = [written(resolve(v, env, i), i) for v in arguments.values()]
        on_call(i)
        function = functions.load(name, i)
        try:
            result = function(*values)
        except (SampleTimeout, MemoryError):
            raise
        except BaseException as exc:  # upstream's bare except: SystemExit counts as a failed call too
            raise StepFailure(WRITE if _read_only(exc) else EXCEPTION, f"{name}: {_describe(exc)}{_limit_note(exc)}",
                              i) from None
        if len(fields) != 1:
            if not fields:  # ({} in the spec: upstream fails it as it fails several, after the call)
                raise StepFailure(NO_OUTPUTS, f"tool {name!r} has no output parameters (an empty object)", i)
            raise StepFailure(MULTIPLE_OUTPUTS, f"tool {name!r} has {len(fields)} output parameters", i)
        env[label] = {fields[0]: result}
        # (now: later calls may mutate what they receive; the answer also says what it is in Python)
        trace.append(render(result, max_chars, describe=i == len(calls) - 1))
    if not calls:
        raise StepFailure(NO_CALLS, "no calls")
    return result


def _read_only(exc):
    """An error the kernel's read-only file system raised: a write outside the sample area, refused."""
    return isinstance(exc, OSError) and exc.errno == errno.EROFS


def _limit_note(exc):
    """What an error the sandbox's own limit raised says next to it: "File too large" alone reads as the function's
    fault, and a function that only prints gets it too (its output is a file under RLIMIT_FSIZE)."""
    if isinstance(exc, OSError) and exc.errno == errno.EFBIG:
        return (" (the sandbox's file size limit, SandboxLimits.file_size_mb; what the sample prints goes to a file "
                "under that limit too)")
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC and _SAMPLE_AREA_MB is not None:
        # Once mounted, the sample area is where samples write: its limit, not the machine's disk (without it, the
        # disk is what is full and the error says so alone)
        return f" (the sandbox's sample area of {_SAMPLE_AREA_MB} MB, SandboxLimits.disk_mb, is full)"
    return ""


# The size of the sample area once its tmpfs is mounted (_read_only_except); None: samples write on the disk
_SAMPLE_AREA_MB = None


def _describe(exc):
    try:
        text = str(exc)
        # (raised without a message, as a bare assert is: named alone, not followed by an empty ': ')
        return (f"{type(exc).__name__}: {text}" if text else type(exc).__name__)[:500]
    except Exception:
        return type(exc).__name__


# -- results as JSON ---------------------------------------------------------------------------------------


# Longest Python repr of an answer kept beside its JSON value (the parent allows for it in a result's line).
ANSWER_REPR_CHARS = 10_000


def render(value, max_chars, describe=False):
    """``{"value": JSON value, "python_type": None | name}``. JSON values are kept as they are; tuples and
    sets become arrays and numpy scalars/arrays their Python values (``python_type`` names the original
    type); anything else (NaN, bytes, objects, dicts with non-string keys, strings holding a lone surrogate,
    which UTF-8 and the parent's codec cannot carry...) becomes its ``repr`` as a string, marked
    ``"repr": true``. ``describe`` (the answer): also ``type_name``, the Python type whatever it is, and
    ``python_repr``, its repr (at most ANSWER_REPR_CHARS), so a report can say what a JSON value does not (the
    string "inf" and the float inf, a tuple and a list)."""
    type_name = type(value).__module__ + "." + type(value).__qualname__
    type_name = type_name[len("builtins."):] if type_name.startswith("builtins.") else type_name
    described = {"type_name": type_name, "python_repr": _short_repr(value)} if describe else {}
    state = {"exact": True, "repr": False}
    try:
        converted = _jsonable(value, 0, state)
        text = json.dumps(converted, ensure_ascii=False, allow_nan=False)
    except Exception:  # too deep, an int too long for str(), a failing __repr__...
        state = {"exact": False, "repr": True}
        converted = _safe_repr(value)
        text = json.dumps(converted, ensure_ascii=False)
    if len(text) > max_chars:
        return {"value": None, "python_type": type_name, "omitted": f"{len(text)} characters of JSON", **described}
    out = {"value": converted, "python_type": None if state["exact"] else type_name, **described}
    if state["repr"]:
        out["repr"] = True
    return out


def _short_repr(value):
    text = _safe_repr(value)
    if len(text) > ANSWER_REPR_CHARS:
        return text[:ANSWER_REPR_CHARS] + f"... ({len(text)} characters or more)"
    return text


def _jsonable(value, depth, state):
    if depth > 100:
        raise ValueError("too deep")
    kind = type(value)
    if kind is str and not _utf8(value):
        return _as_repr(value, state)
    if value is None or kind in (bool, str, int, list, dict) or (kind is float and math.isfinite(value)):
        if kind is list:
            return [_jsonable(v, depth + 1, state) for v in value]
        if kind is dict:
            if all(type(k) is str and _utf8(k) for k in value):
                return {k: _jsonable(v, depth + 1, state) for k, v in value.items()}
            return _as_repr(value, state)
        return value
    state["exact"] = False
    if isinstance(value, (list, tuple)):
        return [_jsonable(v, depth + 1, state) for v in value]
    if isinstance(value, (set, frozenset)):
        items = [_jsonable(v, depth + 1, state) for v in value]
        try:
            return sorted(items)
        except TypeError:
            return items
    if type(value).__module__ == "numpy" and hasattr(value, "tolist"):
        return _jsonable(value.tolist(), depth + 1, state)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float) and math.isfinite(value):
        return float(value)
    if isinstance(value, str) and _utf8(value):
        return str(value)
    return _as_repr(value, state)


def _utf8(text):
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:  # a lone surrogate
        return False


def _escape_surrogates(value):
    """``value`` with every lone surrogate of its strings written as its escape (``\\ud83d``): for free text
    (details, notes), which has no ``repr`` marking."""
    if isinstance(value, str):
        return value if _utf8(value) else value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, list):
        return [_escape_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {_escape_surrogates(k): _escape_surrogates(v) for k, v in value.items()}
    return value


def _as_repr(value, state):
    state["exact"], state["repr"] = False, True
    return _safe_repr(value)


def _safe_repr(value):
    try:
        return _escape_surrogates(repr(value)[:100_000])  # a __repr__ of upstream's may return any text
    except Exception:
        return f"<{type(value).__name__} without a printable form>"


# -- win checks (spec section 9, "Win check") --------------------------------------------------------------


def _listit(value):
    return list(map(_listit, value)) if isinstance(value, (list, tuple)) else value


def upstream_win(ok, value, gold, notes):
    """The official check, bugs included: a failed execution is ``False``, so it matches a gold answer of
    ``0``, ``0.0`` or ``False``; a float is rounded to the digits after the '.' of ``str(gold)`` (exponent
    included: '6.4e-05' gives 5); a top-level tuple is compared as a list."""
    pred = value if ok else False
    if type(gold) is float and type(pred) is float:
        text = str(gold)
        if "." in text:
            rounded = round(pred, len(text.split(".")[1]))
            if "e" in text and rounded != gold and round(pred, decimals_of(gold)) == gold:
                # A report saying only "the answer is 6.4e-05, not the gold 6.4e-05" would contradict itself
                notes.append(f"upstream's check rounds the answer to the {len(text.split('.')[1])} characters after "
                             f"the '.' of {text} (exponent included), which makes {pred!r} {rounded!r}: no win "
                             "(the corrected check counts it)")
            pred = rounded
        else:
            notes.append(f"upstream's scorer crashes on gold {text} (no '.' to count decimals); compared unrounded")
    try:
        if pred == gold:
            return True
        return type(pred) is tuple and type(gold) is list and _listit(pred) == gold
    except Exception as exc:  # e.g. a numpy array compared with a list: upstream's scorer crashes here
        notes.append(f"upstream's scorer crashes comparing the answer ({_describe(exc)}); counted as no win")
        return False


def decimals_of(gold):
    """Decimal places of a float as written by ``repr``, exponent accounted for ('6.4e-05' -> 6)."""
    mantissa, _, exponent = repr(gold).lower().partition("e")
    digits = len(mantissa.partition(".")[2])
    return max(0, digits - int(exponent or 0))


def corrected_equal(pred, gold):
    if isinstance(gold, bool) or isinstance(pred, bool):
        return type(pred) is type(gold) and pred == gold
    if isinstance(gold, (int, float)) and isinstance(pred, (int, float)):
        if isinstance(gold, float) and isinstance(pred, float) and math.isfinite(gold) and math.isfinite(pred):
            return round(pred, decimals_of(gold)) == gold
        return pred == gold
    if isinstance(gold, list) and isinstance(pred, list):
        return len(gold) == len(pred) and all(corrected_equal(p, g) for p, g in zip(pred, gold))
    if isinstance(gold, dict) and isinstance(pred, dict):
        return gold.keys() == pred.keys() and all(corrected_equal(pred[k], gold[k]) for k in gold)
    return type(pred) is type(gold) and pred == gold


def corrected_win(ok, answer, gold):
    """A failed execution never wins; the answer as rendered (tuples as lists, numpy as Python; never a
    ``repr``) must equal the gold value, with floats rounded to the gold's own decimals and ``True`` never
    equal to ``1``."""
    return bool(ok and answer is not None and not answer.get("repr") and "omitted" not in answer
                and corrected_equal(answer["value"], gold))


# -- main loop ---------------------------------------------------------------------------------------------


class Channel:
    def __init__(self, fd):
        self.fd = fd

    def send(self, obj):
        text = json.dumps(obj, ensure_ascii=False, allow_nan=False)
        try:
            data = (text + "\n").encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate in free text (an exception's message...)
            data = (json.dumps(_escape_surrogates(obj), ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view):]


def run_sample(sample, functions, policy, limits, root, workdir, channel):
    # Each sample writes in its own folder only: not the batch's root (where the logs the parent reads are),
    # not another sample's folder. HOME and TMPDIR point into it.
    tmp = os.path.join(workdir, "tmp")
    with policy.unchecked():  # not by widening the allowed roots: a thread an earlier sample left running
        # would write in the batch's root meanwhile. A folder made fresh: an earlier sample that got past the
        # hook may have planted files for this one.
        remove_folder(workdir)
        os.makedirs(tmp)
    os.environ["HOME"], os.environ["TMPDIR"] = workdir, tmp
    tempfile.tempdir = None
    policy.allow([workdir])
    os.chdir(workdir)
    policy.violations.clear()
    trace, notes = [], []
    outcome = {"status": "ok", "reason": None, "detail": "", "failed_call": None}
    ok, value = False, None
    fired = []

    def on_alarm(signum, frame):
        fired.append(True)
        # Raised only into the sample's code (its calls, the win check): the timer repeats until it is stopped, and
        # a signal handled while the outcome is being recorded (one that came while a timed-out sample's memory
        # was freed) would end the process as a crash. ``fired`` makes it a timeout all the same.
        while frame is not None and frame.f_code is not run_sample.__code__:
            if frame.f_code in (execute.__code__, upstream_win.__code__):
                raise SampleTimeout()
            frame = frame.f_back

    signal.signal(signal.SIGALRM, on_alarm)
    cpu_budget(limits["cpu_seconds"])
    # The first signal at the limit, then every 0.2 s in case upstream code swallows it (bare except).
    signal.setitimer(signal.ITIMER_REAL, float(limits["timeout"]), 0.2)
    calls = sample["calls"]
    gold, has_gold, matched, compared = None, False, None, []
    if sample.get("gold") is not None:
        try:
            gold, has_gold = json.loads(sample["gold"]), True
        except (TypeError, ValueError, RecursionError) as exc:  # TypeError: a value, not its JSON text
            notes.append(f"the gold answer is not JSON text ({_describe(exc)}); no win check")
    # The call a failure belongs to: the one running, or the last once all ran (what runs after it is the answer's).
    charged = lambda: min(len(trace), len(calls) - 1) if trace else 0  # noqa: E731
    try:
        if not calls:
            raise StepFailure(NO_CALLS, "no calls")
        value = execute(calls, sample["output_fields"], functions, trace, limits["max_result_chars"],
                        on_call=lambda i: channel.send({"event": "call", "index": i}))
        if has_gold:
            # Upstream's win check compares the answer itself (==: the answer's own __eq__ may run, upstream code):
            # under the timer, and before the refusals are read.
            matched = upstream_win(True, value, gold, compared)
        ok = True
    except StepFailure as failure:
        if failure.reason == MEMORY:  # (a module that ran out of memory while loading: the limit, named)
            outcome.update(status="limit", reason=MEMORY, detail=f"over {limits['memory_mb']} MB {failure.detail}",
                           failed_call=failure.call_index)
        else:
            outcome.update(status="refused" if failure.reason == WRITE else "error", reason=failure.reason,
                           detail=failure.detail, failed_call=failure.call_index)
    except SampleTimeout:
        outcome.update(status="limit", reason=TIMEOUT, detail=f"over {limits['timeout']} s", failed_call=charged())
    except MemoryError:
        outcome.update(status="limit", reason=MEMORY, detail=f"over {limits['memory_mb']} MB", failed_call=charged())
    except BaseException as exc:
        outcome.update(status="refused" if _read_only(exc) else "error", reason=WRITE if _read_only(exc) else EXCEPTION,
                       detail=_describe(exc), failed_call=charged())
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0, 0)
    if fired and outcome["reason"] != TIMEOUT:
        outcome.update(status="limit", reason=TIMEOUT, detail=f"over {limits['timeout']} s (timer swallowed)",
                       failed_call=outcome["failed_call"] if outcome["failed_call"] is not None else charged())
        ok = False
    if policy.violations:
        # A refusal decides the outcome even when upstream code caught the error and carried on.
        reason, detail = policy.violations[0]
        outcome.update(status="refused", reason=reason, detail=detail,
                       failed_call=outcome["failed_call"] if outcome["failed_call"] is not None else charged())
        ok = False
    answer = trace[-1] if ok and trace else None
    if ok and answer is not None and "omitted" in answer:
        outcome.update(status="error", reason=TOO_LARGE, detail=f"answer is {answer['omitted']}",
                       failed_call=len(trace) - 1)
    for k, entry in enumerate(trace[:-1] if ok else []):
        if "omitted" in entry:
            # The sequence ran and its answer is checked: an earlier result too long to carry back is only left out
            # of the results (upstream has no such bound, so it neither fails nor loses the win; executed rows,
            # which need every result, refuse it)
            notes.append(f"the result of call {k} is {entry['omitted']}, longer than max_result_chars: left out of "
                         "the results")
    win = {"upstream": None, "corrected": None}
    if has_gold:
        # Upstream returns False before executing an empty prediction (no False == 0 win there).
        win["upstream"] = bool(calls) and (matched if ok else upstream_win(False, value, gold, notes))
        win["corrected"] = corrected_win(ok, answer, gold)
        if ok:
            notes += compared
    if len(outcome["detail"]) > 2000:  # a prediction's name or reference may be any length; the parent bounds lines
        outcome["detail"] = outcome["detail"][:2000] + "..."
    return dict(outcome, results=trace, answer=answer, win=win, notes=notes)


def remove_folder(path):
    """Remove a sample's folder, whatever it made read-only: not running as root, we cannot empty a folder the
    sample took its own write permission from (its files stayed, and used up the sample area of the next ones).
    Its owner can give it back. (Only the sample's own files can be changed so: a folder swapped for a link to one
    elsewhere belongs to another user.)"""
    if os.geteuid() != 0:
        for folder, _, _ in os.walk(path):
            with contextlib.suppress(OSError):
                os.chmod(folder, 0o700)
    shutil.rmtree(path, ignore_errors=True)


def fresh_log(policy):
    """Empty the log before a sample. stdout and stderr are one file (the parent's log, whose end it quotes when a
    sample crashes), bounded by RLIMIT_FSIZE: kept for the whole batch, what the earlier samples printed used up
    the bound of the later ones (a sample printing a few MB failed with "File too large" after one that printed
    60), and a crash quoted the output of other samples."""
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()  # (what an earlier sample left in the buffers: dropped by the truncation below)
        except Exception:  # a sample may have closed or replaced them
            pass
    with policy.unchecked():
        for fd in (1, 2):
            try:
                os.ftruncate(fd, 0)
                os.lseek(fd, 0, os.SEEK_SET)  # (one offset for both: the parent opened the log once)
            except OSError:  # closed or replaced by a sample, or not a file
                pass


def end_other_processes(policy, batch_user=False):
    """End every process a sample left running, setsid or not, before the next sample starts (it could write in
    that sample's folder, or on the result channel). Only in the batch's PID namespace, whose init is the
    reaper, our parent: there ``kill(-1)`` reaches every process of the namespace but init and this one, and
    none outside it; or as the batch's own user (``batch_user``, a root caller's: see :func:`leave_root`), which
    no process outside the batch is: there it reaches the batch's processes alone (this one a subreaper, so
    that it reaps them)."""
    if os.getppid() != 1 and not batch_user:  # kill(-1) would reach the user's every process
        return
    with policy.unchecked():
        try:
            os.kill(-1, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):  # no other process
            pass
        # Until they are reaped (by us, or by the reaper: orphans) they count against RLIMIT_NPROC: the next
        # sample would find fewer processes than the limit allows. A killed process is reaped in milliseconds;
        # one stuck in the kernel is not waited for long (the parent allows ENDING_SECONDS for all of this).
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            while True:  # reap those that were ours
                try:
                    pid, _ = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    if batch_user:  # (every process of the batch's user came to us, the subreaper: all reaped)
                        return
                    break
                if pid == 0:
                    break
            if not batch_user:  # (outside a PID namespace kill(-1, 0) succeeds while any process is there)
                try:
                    os.kill(-1, 0)  # (a process not yet reaped still receives it)
                except (ProcessLookupError, PermissionError):
                    return
            time.sleep(0.002)


def main():
    # The caller is the watchdog of every limit that is not the sample's own (a timer swallowed, a hang in C): when
    # it dies (SIGKILL, or SIGTERM, which Python does not catch), this process dies too, and with it the reaper, so
    # the PID namespace, or the worker and with it the sample's process. Left running, they ran the sample on.
    _die_with_parent()
    channel = Channel(int(sys.argv[1]))
    request = json.loads(sys.stdin.buffer.read())
    if os.getppid() != request["caller"]:  # (the caller died before that took effect)
        return 1
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)  # upstream code that reads stdin gets EOF, not our request pipe
    sys.stdin = open(0, closefd=False)
    sys.dont_write_bytecode = True
    sys.path[:] = [p for p in request["sys_path"] if p]
    limits = request["limits"]
    batch_id = BATCH_IDS + os.getpid()  # (this process's id in the caller's PID namespace: unique while it runs)
    root = request["root"]
    work_area = os.path.join(root, "work")
    os.makedirs(work_area, exist_ok=True)
    isolation, pid_namespace = isolate(limits.get("network_namespace"), limits.get("kernel_isolation"), work_area,
                                       limits.get("disk_mb", 512))
    if limits.get("network_namespace") is True and isolation["network"] != "namespace":
        channel.send({"event": "fatal", "detail": f"a network namespace was required: {isolation['network']}"})
        return 3
    if limits.get("kernel_isolation") is True and (isolation["filesystem"] != READ_ONLY
                                                   or isolation["processes"] != "namespace"):
        channel.send({"event": "fatal", "detail": "kernel isolation was required: file system "
                      f"{isolation['filesystem']}; processes {isolation['processes']}"})
        return 3
    if pid_namespace:
        enter_pid_namespace(channel.fd)  # from here on: the worker, in the new PID namespace
        mount_own_proc()
    user, as_root = None, ""
    if os.geteuid() == 0 and limits.get("kernel_isolation") is not False:
        # Root's samples would write wherever file permissions allow root, signal any process, and fork without
        # RLIMIT_NPROC: the worker and its samples run as another user (root was needed up to here only).
        user, as_root = leave_root((batch_id, NOBODY), work_area)
    dropped = drop_capabilities(READ_ANYWHERE if user is not None else 0)
    if user is not None and not dropped and root_regained():
        dropped = as_root = "root could be regained"
    if pid_namespace:
        _die_with_parent()  # (a change of user clears it)
    batch_user = user == batch_id and not pid_namespace  # (with a PID namespace, the namespace ends them)
    if batch_user:
        # What a sample leaves behind comes to us when its parent ends, to be reaped (as the reaper does).
        _libc()[1].prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    if dropped and isolation["filesystem"] == READ_ONLY:
        # With capabilities, sample code could make the file system writable again.
        isolation["filesystem"] = f"unavailable: capabilities not dropped ({dropped})"
        if limits.get("kernel_isolation") is True:
            channel.send({"event": "fatal", "detail": f"kernel isolation was required: {isolation['filesystem']}"})
            return 3
    if as_root and isolation["processes"] == "namespace":
        # Bounded by the PID namespace after the sample, not by RLIMIT_NPROC while it runs; file permissions
        # protect nothing the read-only file system does not.
        isolation["processes"] = f"partial: samples run as root ({as_root})"
        if limits.get("kernel_isolation") is True:
            channel.send({"event": "fatal",
                          "detail": f"kernel isolation was required: processes {isolation['processes']}"})
            return 3
    functions = Functions(request["functions_dir"])
    set_limits(limits, limit_tasks=os.geteuid() != 0 and (pid_namespace or user is not None))
    policy = Policy([root])
    sys.addaudithook(policy)  # from here on, and irremovably, every sample runs under the policy
    channel.send(dict(isolation, event="ready", pid=os.getpid()))
    for index, sample in enumerate(request["samples"]):
        fresh_log(policy)
        channel.send({"event": "start", "index": index, "time": time.time()})
        workdir = os.path.join(work_area, str(request["first"] + index))
        status = run_forked(sample, functions, policy, limits, root, workdir, channel, index)
        if pid_namespace or batch_user:
            end_other_processes(policy, batch_user)
        with policy.unchecked():
            # What the sample wrote goes with it: the sample area (disk_mb) is for each sample whole, not what
            # the earlier samples of its batch left of it.
            remove_folder(workdir)
        # How the sample's process ended; the parent charges a sample that sent no result (a crash) with it.
        channel.send({"event": "ended", "index": index, "status": status, "log": log_tail(request["log"])})
    return 0


def run_forked(sample, functions, policy, limits, root, workdir, channel, index):
    """Run one sample in a process forked from this one, which sends the sample's events and result and exits:
    whatever the sample changes in the interpreter (modules, builtins, environment, the working folder, memory
    it keeps, threads it leaves running) goes with its process, so no sample's outcome depends on which
    samples ran before it in its batch. Returns how the process ended: its exit status, or minus the signal
    that ended it."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()  # (or the sample's process would write it again)
    worker = os.getpid()
    with policy.unchecked():
        pid = os.fork()
    if pid == 0:
        # Killed with this process: the sandbox is ended by its process group, which the sample may leave
        # (os.setsid raises no audit event); without a PID namespace it would outlive the batch.
        _die_with_parent()
        if os.getppid() != worker:  # (this process ended before that took effect)
            os._exit(1)
        code = 0
        try:
            result = run_sample(sample, functions, policy, limits, root, workdir, channel)
            channel.send(dict(result, event="result", index=index))
        except BaseException:  # the sandbox's own failure: said in the log, which the parent quotes
            import traceback

            traceback.print_exc()
            code = 70
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # closed or replaced by the sample
                pass
        os._exit(code)  # not exit(): no exit hooks of the sample's, no waiting for its threads
    _, wait_status = os.waitpid(pid, 0)
    return -os.WTERMSIG(wait_status) if os.WIFSIGNALED(wait_status) else os.WEXITSTATUS(wait_status)


def log_tail(path, size=600):
    """The end of the log (the sample's stdout and stderr), for the parent to quote when the sample crashed."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - size))
            return f.read(size).decode("utf-8", "replace")
    except OSError:
        return "(no log)"


if __name__ == "__main__":
    sys.exit(main())
