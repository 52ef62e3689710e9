"""NESTFUL execution: the sandbox on the real rows and on hostile functions of our own, executed rows as
complete trajectories (chat template, toolmind, swift), the functions folder download, and `verify`.

Upstream functions are only ever run in the sandbox's child process, never imported here."""
from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import json
import os
import pickle
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile
import textwrap
import time
from pathlib import Path

import datasets.utils.extract
import pytest

import tooluse_datasets as td
from tooluse_datasets import cli
from tooluse_datasets.builders.ms_swift.source import MsSwiftSource
from tooluse_datasets.builders.nestful.executed import (execute_rows, executed_row, execution_error, execution_job,
                                                        gold_calls)
from tooluse_datasets.builders.nestful.execution import (SandboxError, SandboxLimits, SequenceJob, SequenceResult,
                                                         archive_url, executable_functions, run_sequences)
from tooluse_datasets.builders.nestful.execution.functions import FUNCTIONS_PATH
from tooluse_datasets.builders.nestful.source import NestfulOptions, NestfulSource
from tooluse_datasets.builders.nestful.upstream import UPSTREAM
from tooluse_datasets.builders.nestful.score import ScoreItem, score
from tooluse_datasets.builders.nestful.verify import verify, verify_rows
from tooluse_datasets.builders.toolmind.source import ToolMindSource
from tooluse_datasets.builders.toolmind.writer import write_toolmind_row
from tooluse_datasets.errors import DataNotFoundError, ExecutionError, SkipReport
from tooluse_datasets.formats import output_format
from tooluse_datasets.validation import validate_unified
from tooluse_datasets.source import RowContext

from conftest import shared_data
from hermes_template import render

TOY = ("nestful", "third_party", "AtakanTekparmak_NESTFUL_27c2028", "data_v2", "toy_data.jsonl")
CURRENT = ("nestful", "third_party", "reconstructed_current_v2", "rows_github_native_format.jsonl")
HF_CURRENT = ("nestful", "third_party", "reconstructed_current_v2", "rows_hf_string_format.jsonl")
ICL = ("nestful", "src", "icl_examples.json")
FUNCTIONS = ("nestful", "data_v2", "executable_functions")
NETWORK_ROW = "fa57c28a-e9d8-44fb-a358-a9404a557d5b"  # get_url_content("https://www.example.com")

FAST = SandboxLimits(timeout=0.6, cpu_seconds=5, grace=0.6, memory_mb=1024)


def ctx(i: int = 0) -> RowContext:
    return RowContext("nestful", "test", i, "train")


def unified_rows(*parts_list) -> list[dict]:
    source = NestfulSource()
    rows = []
    for parts in parts_list:
        path = shared_data(*parts)
        natives = json.loads(path.read_text()) if path.suffix == ".json" else [
            json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        rows += [source.to_unified(source.to_raw(n, ctx(i)), ctx(i)) for i, n in enumerate(natives)]
    return rows


@pytest.fixture(scope="module")
def functions_dir():
    return str(shared_data(*FUNCTIONS))


@pytest.fixture(scope="module")
def real_rows():
    return unified_rows(TOY, CURRENT, HF_CURRENT, ICL)


@pytest.fixture(scope="module")
def real_results(real_rows, functions_dir):
    started = time.monotonic()
    results = run_sequences([execution_job(r) for r in real_rows], functions_dir)
    return results, time.monotonic() - started


# --------------------------------------------------------------------------------------------------
# The real rows
# --------------------------------------------------------------------------------------------------


def test_every_real_row_reproduces_its_gold_answer_except_the_one_needing_network(real_rows, real_results):
    results, seconds = real_results
    assert len(results) == len(real_rows) == 64 + 2 + 2 + 3
    by_id = {r["meta"]["sample_id"]: res for r, res in zip(real_rows, results)}
    refused = by_id.pop(NETWORK_ROW)
    assert (refused.status, refused.reason) == ("refused", "network")
    assert refused.failed_call == 0 and refused.win_upstream is False and refused.win_corrected is False
    for sample_id, res in by_id.items():
        assert res.ok and res.win_upstream and res.win_corrected, (sample_id, res.describe())
    # One sandbox process for the whole batch; seconds, not minutes (72 sequences, 230 calls).
    assert seconds < 60


def test_results_are_the_actual_values_of_each_call(real_rows, real_results):
    results, _ = real_results
    row, res = next((r, s) for r, s in zip(real_rows, results) if r["meta"]["sample_id"].startswith("3a4b7b77"))
    # divide(25, 100) -> multiply($var_1, 80) -> add(20, $var_2)
    assert [r["value"] for r in res.results] == [0.25, 20.0, 40.0]
    assert res.answer == {"value": 40.0, "python_type": None, "type_name": "float", "python_repr": "40.0"}
    assert row["meta"]["gold_answer"] == 40.0


def test_the_network_refusal_is_reported_whatever_isolation_the_machine_allows(real_rows, functions_dir):
    row = next(r for r in real_rows if r["meta"]["sample_id"] == NETWORK_ROW)
    (res,) = run_sequences([execution_job(row)], functions_dir, SandboxLimits(network_namespace=False))
    assert (res.status, res.reason) == ("refused", "network") and res.network == "off"
    assert "urllib.Request" in res.detail


# --------------------------------------------------------------------------------------------------
# Hostile functions of our own
# --------------------------------------------------------------------------------------------------

EVIL = '''
import ctypes, json, os, signal, socket, subprocess, sys, time

def open_socket(host):
    socket.create_connection((host, 80), timeout=1)
    return 1

def processes_in_sight(pid):
    """The process ids /proc lists, and the command line of process ``pid`` (None: not in sight)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            command = f.read().decode("utf-8", "replace")
    except OSError:
        command = None
    return [sorted(int(p) for p in os.listdir("/proc") if p.isdigit()), command]

def write_outside(path):
    with open(path, "w") as f:
        f.write("x")
    return 1

def change_through_a_descriptor(path, how):
    fd = os.open(path, os.O_RDONLY)
    try:
        {"fchmod": lambda: os.fchmod(fd, 0o777), "fchown": lambda: os.fchown(fd, os.getuid(), os.getgid()),
         "utime": lambda: os.utime(fd, (0, 0))}[how]()
    finally:
        os.close(fd)
    return 1

def change_own_file_through_a_descriptor(name):
    with open(name, "w") as f:
        f.write("x")
    fd = os.open(name, os.O_RDONLY)
    os.fchmod(fd, 0o600)
    os.utime(fd, (0, 0))
    os.close(fd)
    return os.stat(name).st_mtime

def fill_the_disk(files, mb):
    for k in range(files):
        with open(f"fill-{k}", "wb") as f:
            f.write(b"x" * (mb << 20))
    return files

def no_space_left():
    import errno
    raise OSError(errno.ENOSPC, "No space left on device")

def write_inside(name):
    with open(name, "w") as f:
        f.write("x")
    return os.path.dirname(os.path.abspath(name))

def relative_file_work(folder):
    """What upstream functions do with a folder they are given (os.makedirs, os.remove, os.rename, os.rmdir)."""
    os.makedirs(os.path.join(folder, "sub"))
    with open(os.path.join(folder, "sub", "a.txt"), "w") as f:
        f.write("x")
    os.rename(os.path.join(folder, "sub", "a.txt"), os.path.join(folder, "b.txt"))
    os.chmod(os.path.join(folder, "b.txt"), 0o600)
    os.remove(os.path.join(folder, "b.txt"))
    os.rmdir(os.path.join(folder, "sub"))
    return sorted(os.listdir(folder))

def write_in_home(name):
    with open(os.path.join(os.environ["HOME"], name), "w") as f:
        f.write("x")
    return os.environ["HOME"]

def write_beside(relative):
    with open(os.path.join("..", relative), "w") as f:
        f.write("planted")
    return 1

def plant_beside(relative):
    path = os.path.join("..", relative)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("planted")
    return 1

def read_beside(relative):
    return os.path.exists(os.path.join("..", relative))

def swallow_refusal(path):
    try:
        open(path, "a").close()
    except OSError:
        pass
    return 0

def delete_outside(path):
    os.remove(path)

def spawn(command):
    return subprocess.run(command, shell=True).returncode

def system(command):
    return os.system(command)

def loop_forever(x):
    while True:
        pass

def loop_swallowing_the_timer(x):
    while True:
        try:
            while True:
                pass
        except BaseException:
            pass

def leave_the_group_and_hang(x):
    os.setsid()  # no audit event: the sandbox's process group no longer holds this process
    loop_swallowing_the_timer(x)

def burn_cpu_swallowing(x):
    loop_swallowing_the_timer(x)

def free_slowly_when_stopped(n):
    kept = [[i] for i in range(n)]  # freed (in C, no Python code runs) as the timeout unwinds this frame
    signal.setitimer(signal.ITIMER_REAL, 0.01, 0.002)  # and the timer repeats meanwhile
    while True:
        pass

def cpu_budget_left(x):
    import resource
    return resource.getrlimit(resource.RLIMIT_CPU)[0] - time.process_time()

def segfault(x):
    ctypes.string_at(0)

def hard_exit(x):
    os._exit(x)

def shout(mb):
    sys.stdout.write("x" * (mb << 20))
    sys.stdout.flush()
    return mb

def eat_memory(n):
    return len(bytearray(n))

def kill_parent(x):
    os.kill(os.getppid(), 0)  # signal 0 only probes; any signal to another process is refused
    return 1

def raises(x):
    raise ValueError("bad input")

def raises_with(x):
    raise ValueError(x)

def asserts(x):
    assert x == 1

class Odd:
    def __repr__(self):
        return "odd \\ud83d"

def returns_odd(x):
    return [Odd(), {x: 1}]

def exits(x):
    raise SystemExit(x)

def returns_tuple(x):
    return (x, x)

def returns_set(x):
    return {x, 1}

def returns_nan(x):
    return float("nan")

def returns_text(x):
    return str(x)

def add(a, b):
    return a + b

def nap(seconds):
    time.sleep(seconds)
    return seconds

def leave_a_writer(name, delay):
    import threading

    def write():
        time.sleep(delay)
        with open(name, "w") as f:  # relative: the working folder by then, the next sample's
            f.write("planted")

    threading.Thread(target=write).start()
    return delay

def leave_a_raw_writer(name, delay):
    import _thread  # a thread the threading module does not count

    def write():
        time.sleep(delay)
        with open(name, "w") as f:
            f.write("planted")

    _thread.start_new_thread(write, ())
    return delay

def look_later(name, seconds):
    time.sleep(seconds)
    return os.path.exists(name)

def hang_after_the_result(x):
    # The sample's process sends its result, flushes its output and ends: an output whose flush stops the process
    # keeps it from ending. (Stopping itself is no signal to another process.)
    class Stopping:
        def write(self, text):
            return len(text)

        def flush(self):
            os.kill(os.getpid(), signal.SIGSTOP)

    sys.stdout = Stopping()
    return x

def delay_the_exit(seconds):
    import atexit
    atexit.register(time.sleep, seconds)  # the interpreter runs it when the batch ends
    return seconds

def leave_state(value):
    import builtins
    import types
    os.environ["NESTFUL_LEFT"] = value
    builtins.nestful_left = value
    sys.modules["nestful_left"] = types.ModuleType("nestful_left")
    return value

def find_state(x):
    import builtins
    return [os.environ.get("NESTFUL_LEFT"), hasattr(builtins, "nestful_left"), "nestful_left" in sys.modules]

def hoard(mb):
    import math
    math.nestful_hoard = bytearray(mb << 20)  # kept by a module, past the sample
    return mb

# -- the parent's result channel: its number is the child's argument ------------------------------------

def write_to_the_parent(text):
    os.write(int(sys.argv[1]), text.encode())
    return 1

def forge_the_next_result(x):
    forged = {"event": "result", "index": 1, "status": "ok", "reason": None, "detail": "", "failed_call": None,
              "results": [{"value": 3, "python_type": None}], "answer": {"value": 3, "python_type": None},
              "win": {"upstream": True, "corrected": True}, "notes": []}
    os.write(int(sys.argv[1]), (json.dumps(forged) + "\\n").encode())
    os._exit(0)

def forge_a_malformed_result(x):
    forged = {"event": "result", "index": 0, "status": "ok", "reason": None, "detail": "", "failed_call": None,
              "results": [{}], "answer": None, "win": {"upstream": None, "corrected": None}, "notes": []}
    os.write(int(sys.argv[1]), (json.dumps(forged) + "\\n").encode())
    os._exit(0)

def dribble(seconds):
    signal.signal(signal.SIGALRM, signal.SIG_IGN)  # the sample's timer no longer fires
    for _ in range(int(seconds * 2)):
        os.write(int(sys.argv[1]), b" ")
        time.sleep(0.5)
    return seconds

# -- past the audit hook: only the kernel's isolation stops these -----------------------------------------

def without_the_audit_hook(name, *args):
    import gc
    policy = next(o for o in gc.get_objects() if type(o).__name__ == "Policy")
    policy._thread.busy = True  # the hook now lets everything of this thread through
    return globals()[name](*args)

def create_with_dir_fd(folder, name):
    fd = os.open(folder, os.O_RDONLY)
    os.write(os.open(name, os.O_WRONLY | os.O_CREAT, dir_fd=fd), b"planted")
    return 1

def mkdir_with_dir_fd(folder, name):
    os.mkdir(name, dir_fd=os.open(folder, os.O_RDONLY))
    return 1

def remove_with_dir_fd(folder, name):
    os.remove(name, dir_fd=os.open(folder, os.O_RDONLY))
    return 1

def overwrite_through_a_link(path):
    os.link(path, "ln")
    with open("ln", "w") as f:
        f.write("overwritten")
    return 1

def sqlite_attach(path):
    import sqlite3
    db = sqlite3.connect(":memory:")
    db.execute(f"ATTACH DATABASE '{path}' AS other")
    db.execute("CREATE TABLE other.t (x)")
    db.commit()
    return 1

def sqlite_uri(path):
    import sqlite3
    db = sqlite3.connect(f"file:{path}?mode=rwc", uri=True)
    db.execute("CREATE TABLE t (x)")
    db.commit()
    return 1

def make_fifo(path):
    os.mkfifo(path)
    return 1

def detach_a_writer(path, delay):
    """A new session (setsid) through the C function subprocess uses, which raises no audit event."""
    import _posixsubprocess
    command = f"sleep {delay}; echo planted > {path}"
    error_r, error_w = os.pipe()
    head = ([b"/bin/sh", b"-c", command.encode()], [b"/bin/sh"], True, (error_w,), None, None,
            -1, -1, -1, -1, -1, -1, error_r, error_w, True, True)
    if sys.version_info >= (3, 11):  # process_group ... allow_vfork, as subprocess passes them
        pid = _posixsubprocess.fork_exec(*head, -1, None, None, None, -1, None, False)
    else:  # gid, extra_groups, uid, child_umask, preexec_fn
        pid = _posixsubprocess.fork_exec(*head, None, None, None, -1, None)
    os.close(error_w)
    os.read(error_r, 1)  # closed on exec
    return pid

class EqualToAll:
    """An answer whose own comparison reaches out (the win check compares the answer with the gold: ==)."""
    def __init__(self, action):
        self.action = action

    def __eq__(self, other):
        try:
            if self.action == "network":
                socket.create_connection(("example.com", 80), timeout=1)
            else:
                while True:
                    pass
        except BaseException:
            pass
        return True

def compares_by_its_own(action):
    return EqualToAll(action)

def open_for_writing(path):
    os.close(os.open(path, os.O_WRONLY))
    return path

def fork_through_libc_and_stay(seconds):
    """A process of the sample's own, through libc's fork (no audit event), that lives on after the sample holding
    every descriptor it inherited, the result channel's too."""
    pid = ctypes.CDLL(None).fork()
    if pid == 0:
        time.sleep(seconds)
        os._exit(0)
    return pid

def leave_shared_memory(key):
    """A System V shared memory segment (no audit event, and it outlives every process unless removed)."""
    libc = ctypes.CDLL(None, use_errno=True)
    shmid = libc.shmget(key, 1 << 20, 0o1000 | 0o600)  # IPC_CREAT
    if shmid < 0:
        raise OSError(ctypes.get_errno(), "shmget")
    return shmid
'''


@pytest.fixture(scope="module")
def evil_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("evil_functions")
    (folder / "basic_functions.py").write_text("def add(a, b):\n    return a + b\n")
    (folder / "evil.py").write_text(EVIL)
    names = [line[4:line.index("(")] for line in EVIL.splitlines() if line.startswith("def ")]
    (folder / "func_file_map.json").write_text(json.dumps({n: "evil.py" for n in names}))
    return folder


def one_call(name, *args, gold=None):
    call = {"name": name, "label": "$var_1", "arguments": {f"arg_{i}": a for i, a in enumerate(args)}}
    return SequenceJob([call], {name: ["result"]}, gold)


def test_network_files_processes_and_signals_are_refused_and_reported(evil_dir, tmp_path):
    outside = tmp_path / "outside.txt"
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    spawned = tmp_path / "spawned.txt"
    jobs = [one_call("open_socket", "example.com"), one_call("write_outside", str(outside)),
            one_call("swallow_refusal", str(outside), gold="0"), one_call("delete_outside", str(victim)),
            one_call("spawn", f"echo x > {spawned}"), one_call("system", f"echo x > {spawned}"),
            one_call("kill_parent", 1), one_call("write_inside", "ok.txt")]
    results = run_sequences(jobs, evil_dir, FAST)
    got = [(r.status, r.reason) for r in results]
    assert got == [("refused", "network"), ("refused", "write_outside_workdir"), ("refused", "write_outside_workdir"),
                   ("refused", "write_outside_workdir"), ("refused", "subprocess"), ("refused", "subprocess"),
                   ("refused", "signal"), ("ok", None)]
    assert not outside.exists() and not spawned.exists() and victim.read_text() == "keep"
    # A refusal the code caught and ignored still decides the outcome (the value 0 would match the gold).
    assert results[2].win_corrected is False
    # Writing inside the sample's own work folder is allowed; each sample has a fresh one.
    assert "/work/" in results[-1].answer["value"] and str(tmp_path) not in results[-1].answer["value"]


def test_relative_paths_in_the_work_folder_are_allowed_and_outside_it_refused(evil_dir, tmp_path):
    """os.mkdir, os.remove, os.rename, os.chmod... raise their audit event with dir_fd -1 when none is given; the
    hook took -1 for a descriptor, found no folder behind it and refused every relative path: a real function
    making an output folder it is given by name (os.makedirs("out")) failed with write_outside_workdir."""
    outside = os.path.relpath(tmp_path, "/")
    jobs = [one_call("relative_file_work", "."), one_call("relative_file_work", "out"),
            one_call("relative_file_work", "../../../../../../../../" + outside)]
    for limits in (FAST, dataclasses.replace(FAST, kernel_isolation=False, network_namespace=False)):
        results = run_sequences(jobs, evil_dir, limits)
        assert [(r.status, r.detail, r.answer["value"] if r.answer else None) for r in results[:2]] == [
            ("ok", "", ["tmp"]), ("ok", "", [])]
        assert (results[2].status, results[2].reason) == ("refused", "write_outside_workdir")
        assert os.listdir(tmp_path) == []


def test_a_file_outside_changed_through_a_descriptor_is_refused_without_kernel_isolation(evil_dir, tmp_path):
    """The hook checks chmod, chown and utime by path; given a descriptor (os.fchmod on a file opened for reading
    outside) they carry an integer, which it let through: a file outside went from 0600 to 0777."""
    import stat

    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    victim.chmod(0o600)
    os.utime(victim, (1_000_000, 1_000_000))
    limits = dataclasses.replace(FAST, kernel_isolation=False, network_namespace=False)
    jobs = [one_call("change_through_a_descriptor", str(victim), how) for how in ("fchmod", "fchown", "utime")]
    jobs.append(one_call("change_own_file_through_a_descriptor", "mine.txt"))
    results = run_sequences(jobs, evil_dir, limits)
    assert [(r.status, r.reason) for r in results] == [("refused", "write_outside_workdir")] * 3 + [("ok", None)]
    assert "descriptor" in results[0].detail and str(victim) in results[0].detail
    assert stat.S_IMODE(victim.stat().st_mode) == 0o600 and victim.stat().st_mtime == 1_000_000
    assert results[-1].answer["value"] == 0


@pytest.fixture(scope="module")
def kernel_isolation(evil_dir):
    """The sandbox's kernel isolation on this machine (read from what a harmless sample reports); tests of what
    only the kernel stops are skipped where it is unavailable, before any hostile code runs."""
    (probe,) = run_sequences([one_call("add", 1, 2)], evil_dir, FAST)
    if probe.filesystem != "read-only" or probe.processes != "namespace":
        pytest.skip(f"no kernel isolation here (file system: {probe.filesystem}; processes: {probe.processes})")
    return probe


@pytest.fixture
def marked(monkeypatch):
    """A mark in the sandbox's environment, inherited by every process its samples start: the test finds any
    that outlive run_sequences with :func:`alive`."""
    import uuid

    from tooluse_datasets.builders.nestful.execution import sandbox

    mark = f"NESTFUL_TEST_MARK={uuid.uuid4().hex}"
    clean = sandbox.clean_environment
    monkeypatch.setattr(sandbox, "clean_environment", lambda root: dict(clean(root), NESTFUL_TEST_MARK=mark[18:]))
    return mark


def alive_after_kill(mark: str, within: float = 3.0) -> list[int]:
    """The marked processes still there ``within`` seconds: SIGKILL is sent at once, but a process it ends takes
    a moment to go (more on a loaded machine), and the sample's process is a level below the child killed."""
    deadline = time.monotonic() + within
    while (found := alive(mark)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return found


def alive(mark: str) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if mark.encode() in f.read().split(b"\0"):
                    found.append(int(pid))
        except OSError:  # gone meanwhile
            pass
    return found


def test_writes_past_the_audit_hook_meet_a_read_only_file_system(evil_dir, kernel_isolation, tmp_path, marked):
    """What the audit hook cannot see (an open relative to a dir_fd, mkfifo, sqlite's ATTACH) or can be talked out
    of (switched off through gc) is stopped by the kernel: outside the batch's sample area the file system is
    read-only. Each bypass runs with the hook switched off too; what the hook sees it still reports."""
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim.txt"
    victim.write_text("keep")
    bypasses = [("create_with_dir_fd", str(outside), "created.txt"), ("mkdir_with_dir_fd", str(outside), "made"),
                ("remove_with_dir_fd", str(outside), "victim.txt"), ("overwrite_through_a_link", str(victim)),
                ("sqlite_attach", str(outside / "attached.db")), ("sqlite_uri", str(outside / "uri.db")),
                ("make_fifo", str(outside / "fifo"))]
    jobs = [one_call(*b) for b in bypasses] + [one_call("without_the_audit_hook", *b) for b in bypasses]
    jobs.append(one_call("without_the_audit_hook", "spawn", f"echo x > {outside}/spawned.txt; echo x > {victim}"))
    results = run_sequences(jobs, evil_dir, FAST)
    assert sorted(os.listdir(outside)) == ["victim.txt"] and victim.read_text() == "keep"
    assert alive(marked) == []
    got = [(r.status, r.reason) for r in results]
    refused = ("refused", "write_outside_workdir")
    # With the hook: it refuses what it sees; the kernel refuses the rest (EROFS, reported as the same refusal).
    assert got[:7] == [refused] * 4 + [("error", "exception"), refused, refused]
    # Without it, only the kernel: EROFS; a hard link across mounts fails (EXDEV); sqlite cannot open the file.
    assert got[7:14] == [refused, refused, refused, ("error", "exception"), ("error", "exception"),
                         ("error", "exception"), refused]
    assert "Read-only file system" in results[7].detail and "cross-device" in results[10].detail
    assert got[14] == ("ok", None) and results[14].answer["value"] != 0  # the shell's writes failed


def test_device_files_past_the_audit_hook_cannot_be_opened_for_writing_but_the_harmless_ones(evil_dir,
                                                                                          kernel_isolation, tmp_path):
    """A read-only mount stops writes to files, not to devices: a sample running as root, with the hook switched off,
    opened /dev/kmsg (the kernel's log), unmounted disks and loop devices, or a device file anywhere else, for
    writing. Device files are refused on every mount but /dev/null, /dev/zero, /dev/full, /dev/random,
    /dev/urandom and /dev/tty."""
    node = tmp_path / "null-elsewhere"
    try:
        os.mknod(node, 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # /dev/null's numbers
    except PermissionError:
        pytest.skip("making a device file needs root")
    jobs = [one_call("without_the_audit_hook", "open_for_writing", path)
            for path in (str(node), "/dev/kmsg", "/dev/null", "/dev/zero", "/dev/urandom")]
    results = run_sequences(jobs, evil_dir, FAST)
    for res in results[:2]:
        assert (res.status, res.reason) == ("error", "exception") and "Permission denied" in res.detail, res.describe()
    assert [(r.status, r.answer["value"]) for r in results[2:]] == [
        ("ok", "/dev/null"), ("ok", "/dev/zero"), ("ok", "/dev/urandom")]


def test_processes_a_sample_starts_end_with_the_batch_even_in_a_new_session(evil_dir, kernel_isolation, tmp_path,
                                                                            marked):
    """A process started in a new session leaves the sandbox's process group; it still lives in the batch's PID
    namespace, which ends with the batch."""
    planted = tmp_path / "planted.txt"
    results = run_sequences([one_call("detach_a_writer", str(planted), 1.5),
                             one_call("without_the_audit_hook", "detach_a_writer", str(planted), 2)], evil_dir, FAST)
    assert [r.status for r in results] == ["ok", "ok"]
    assert alive(marked) == []
    time.sleep(2.5)
    assert not planted.exists()


def test_a_sample_sees_no_process_outside_its_batch(evil_dir, kernel_isolation):
    """/proc was the caller's: a sample saw every process of the machine, the caller's command line (which may
    carry a token) among them, and, for a caller that is not root, the caller's environment (same user). In the
    batch's PID namespace it sees its own: the reaper, the worker and itself."""
    import shutil

    mount_proc = ["unshare", "--pid", "--fork", "--mount", "--mount-proc", "true"]
    if os.geteuid() != 0:
        mount_proc[1:1] = ["--user", "--map-root-user"]
    if shutil.which("unshare") and subprocess.run(mount_proc, capture_output=True).returncode != 0:
        pytest.skip("this machine refuses a /proc of a new PID namespace (a container masking parts of /proc)")
    (result,) = run_sequences([one_call("processes_in_sight", os.getpid())], evil_dir, FAST)
    assert result.ok, result.describe()
    pids, command = result.answer["value"]
    assert command is None or "pytest" not in command
    assert pids == [1, 2, max(pids)] and max(pids) < 100, pids


def system_v_segments(key: int) -> list[str]:
    """Lines of /proc/sysvipc/shm (this process's IPC namespace, the caller's) whose key is ``key``."""
    with open("/proc/sysvipc/shm") as f:
        return [line for line in f if line.split()[0] == str(key)]


def test_shared_memory_a_sample_leaves_ends_with_the_batch(evil_dir, kernel_isolation):
    """System V IPC objects belong to an IPC namespace, not to a process or a file system: a segment a sample
    creates (through ctypes: no audit event) used to stay in the caller's namespace after the batch, holding its
    memory on the machine past every limit. The batch has an IPC namespace of its own, gone with it."""
    import random

    key = random.randrange(1 << 24, 1 << 30)
    try:
        (result,) = run_sequences([one_call("leave_shared_memory", key)], evil_dir, FAST)
        assert result.ok, result.describe()  # the sample made its segment...
        assert system_v_segments(key) == []  # ...which is not the caller's
    finally:
        for line in system_v_segments(key):  # (the old sandbox's leftover: removed, IPC_RMID)
            ctypes.CDLL(None).shmctl(int(line.split()[1]), 0, None)


def test_a_process_a_sample_leaves_running_ends_before_the_next_sample(evil_dir, kernel_isolation):
    """No audit event sees a process started through the C function subprocess uses; it would live on into the
    next sample and write in its folder. The worker ends every other process of the PID namespace after each
    sample."""
    results = run_sequences([one_call("detach_a_writer", "../1/planted.txt", 0.2),
                             one_call("look_later", "planted.txt", 0.5)], evil_dir, FAST)
    assert [r.status for r in results] == ["ok", "ok"]
    assert results[1].answer["value"] is False


FORK_THROUGH_LIBC = """
import ctypes, os, time

def fork_through_libc(n, seconds):
    libc = ctypes.CDLL(None, use_errno=True)  # libc's fork: no audit event
    made = refused = 0
    for _ in range(n):
        pid = libc.fork()
        if pid == 0:
            time.sleep(seconds)
            os._exit(0)
        made, refused = made + (pid > 0), refused + (pid < 0)
    return [made, refused]
"""


def test_processes_forked_through_native_code_are_bounded_while_the_sample_runs():
    """libc's fork through ctypes raises no audit event: a sample could start processes without number until its
    time ran out (the PID namespace ends them only after it). RLIMIT_NPROC bounds the tasks of the batch's user
    namespace. The kernel does not apply it to root: run as nobody then (reading this interpreter wherever it is,
    a capability the sandbox drops). The forked children sleep: none may outlive the batch, and those of a sample
    are gone before the next one starts (until reaped, they counted against the next sample's limit)."""
    import shutil
    import tempfile
    import uuid

    from tooluse_datasets.builders.nestful.execution.child import MAX_TASKS

    prefix = []
    if os.geteuid() == 0:
        if not shutil.which("setpriv"):
            pytest.skip("running as nobody needs setpriv")
        caps = "+dac_override,+dac_read_search"
        prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", f"--inh-caps={caps}",
                  f"--ambient-caps={caps}"]
        if subprocess.run(prefix + [sys.executable, "-c", ""], capture_output=True).returncode != 0:
            pytest.skip("cannot run this interpreter as nobody here")
    forks, mark = MAX_TASKS + 40, uuid.uuid4().hex
    with tempfile.TemporaryDirectory(prefix="nestful-forks-") as folder:  # (pytest's folders are the user's only)
        os.chmod(folder, 0o755)
        for name, text in (("basic_functions.py", ""), ("forks.py", FORK_THROUGH_LIBC),
                           ("func_file_map.json", json.dumps({"fork_through_libc": "forks.py"}))):
            with open(os.path.join(folder, name), "w") as f:
                f.write(text)
            os.chmod(os.path.join(folder, name), 0o644)
        script = textwrap.dedent(f"""
            import json
            from tooluse_datasets.builders.nestful.execution import sandbox
            clean = sandbox.clean_environment
            sandbox.clean_environment = lambda root: dict(clean(root), NESTFUL_TEST_MARK={mark!r})
            calls = [[{{"name": "fork_through_libc", "label": "$var_1", "arguments": {{"n": n, "seconds": 60}}}}]
                     for n in [{forks}, 5] * 4]
            jobs = [sandbox.SequenceJob(c, {{"fork_through_libc": ["result"]}}) for c in calls]
            results = sandbox.run_sequences(jobs, {folder!r}, sandbox.SandboxLimits(timeout=5, grace=1, memory_mb=1024))
            print(json.dumps([[r.status, r.processes, r.answer, r.detail] for r in results]))
        """)
        run = subprocess.run(prefix + [sys.executable, "-c", script], capture_output=True, text=True, cwd="/",
                             timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    results = json.loads(run.stdout)
    if results[0][1] != "namespace":
        pytest.skip(f"no PID namespace for a user that is not root here ({results[0][1]})")
    assert [status for status, _, _, _ in results] == ["ok"] * 8, results
    made, refused = results[0][2]["value"]
    assert made <= MAX_TASKS - 4 and refused == forks - made  # (the child, reaper, worker and sample count too)
    assert [answer["value"] for _, _, answer, _ in results] == [[made, refused], [5, 0]] * 4
    assert alive_after_kill(f"NESTFUL_TEST_MARK={mark}") == []


def test_what_a_batch_writes_in_all_is_bounded_and_left_nowhere(evil_dir, kernel_isolation):
    """RLIMIT_FSIZE bounds each file; the sample area, a tmpfs of disk_mb, bounds them all, and ends with the
    batch."""

    limits = dataclasses.replace(FAST, disk_mb=8, file_size_mb=4)
    results = run_sequences([one_call("fill_the_disk", 1, 3), one_call("fill_the_disk", 3, 3)], evil_dir, limits)
    assert (results[0].status, results[1].status, results[1].reason) == ("ok", "error", "exception")
    assert "No space left" in results[1].detail
    assert "the sandbox's sample area of 8 MB, SandboxLimits.disk_mb, is full" in results[1].detail  # not the disk


def test_a_full_disk_without_kernel_isolation_is_not_called_the_sample_area(evil_dir):
    """Without kernel isolation no sample area is mounted: a full disk is the machine's, not SandboxLimits.disk_mb."""
    limits = dataclasses.replace(FAST, kernel_isolation=False)
    (result,) = run_sequences([one_call("no_space_left")], evil_dir, limits)
    assert (result.status, result.reason) == ("error", "exception")
    assert "No space left" in result.detail and "disk_mb" not in result.detail


def test_what_earlier_samples_printed_does_not_use_up_the_file_size_of_later_ones(evil_dir):
    """stdout and stderr go to one log bounded by RLIMIT_FSIZE; it used to be kept for the whole batch, so a sample
    that printed 3 MB of a 4 MB bound made the next one that printed as much fail ("File too large")."""

    limits = dataclasses.replace(FAST, file_size_mb=4)
    results = run_sequences([one_call("shout", 3), one_call("shout", 3), one_call("shout", 5), one_call("hard_exit", 3)],
                            evil_dir, limits)
    assert [(r.status, r.reason) for r in results[:3]] == [("ok", None), ("ok", None), ("error", "exception")]
    assert "File too large" in results[2].detail  # a sample's own output is bounded all the same
    assert results[3].reason == "crash" and "xxxx" not in results[3].detail  # the log quoted is the crashed one's


def test_a_sample_past_the_file_size_limit_is_told_it_is_the_sandboxs_limit(evil_dir):
    """Printing or writing past file_size_mb fails the function with "OSError: File too large", which read as a bug
    of a function that only prints: the detail says it is the sandbox's limit, and which one."""
    limits = dataclasses.replace(FAST, file_size_mb=2)
    results = run_sequences([one_call("shout", 3), one_call("fill_the_disk", 1, 3), one_call("shout", 1)], evil_dir,
                            limits)
    assert [(r.status, r.reason) for r in results] == [("error", "exception"), ("error", "exception"), ("ok", None)]
    for result in results[:2]:
        assert "File too large (the sandbox's file size limit, SandboxLimits.file_size_mb" in result.detail


def test_each_sample_has_the_whole_sample_area_whatever_the_earlier_ones_wrote(evil_dir, kernel_isolation):
    """The files a sample wrote go with it: the next sample of the batch gets the whole sample area. (They used to
    stay until the batch ended: the second sample ran out of space because of the first, and a row's outcome
    depended on which rows shared its batch.)"""

    limits = dataclasses.replace(FAST, disk_mb=8, file_size_mb=4)
    results = run_sequences([one_call("fill_the_disk", 2, 3), one_call("fill_the_disk", 2, 3),
                             one_call("fill_the_disk", 2, 3)], evil_dir, limits)
    assert [(r.status, r.detail) for r in results] == [("ok", "")] * 3


def test_a_sample_past_the_audit_hook_plants_nothing_for_the_next_one(evil_dir, kernel_isolation):
    """The sample area is writable to the kernel: a sample that switches the hook off can write in the next
    sample's folder before it exists. Each sample's folder is made fresh."""
    results = run_sequences([one_call("without_the_audit_hook", "plant_beside", "1/planted.txt"),
                             one_call("read_beside", "1/planted.txt")], evil_dir, FAST)
    assert results[0].ok and results[1].ok and results[1].answer["value"] is False


def test_a_user_namespace_whose_ids_cannot_be_mapped_is_not_entered(tmp_path):
    """Where user namespaces are made but their ids cannot be mapped (AppArmor's default on Ubuntu for
    unprivileged users), the child must not enter one: it could not leave it, and with unmapped ids it creates
    no file. It tries in a forked process first, and otherwise stays where it is (the audit hook alone).
    Run in a subprocess that loads the sandbox's child module (our code, not upstream's) as a non-root user
    would see it."""
    from tooluse_datasets.builders.nestful.execution.sandbox import CHILD

    script = textwrap.dedent(f"""
        import importlib.util, os
        spec = importlib.util.spec_from_file_location("child", {str(CHILD)!r})
        child = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(child)
        def refuse(uid, gid):
            raise PermissionError("writing uid_map refused")
        child._map_own_ids = refuse
        os.geteuid = lambda: 1000
        before = os.stat("/proc/self/ns/user").st_ino
        status, pid_namespace = child.isolate(None, None, {str(tmp_path)!r}, 64)
        print(sorted(set(status.values())), pid_namespace, os.stat("/proc/self/ns/user").st_ino == before)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['unavailable: cannot map the user namespace (writing uid_map refused)'] False True"


def test_kernel_isolation_is_a_switch_and_is_reported(evil_dir):

    (off,) = run_sequences([one_call("add", 1, 2)], evil_dir,
                           dataclasses.replace(FAST, kernel_isolation=False, network_namespace=False))
    assert off.ok and (off.network, off.filesystem, off.processes) == ("off", "off", "off")
    (tried,) = run_sequences([one_call("add", 1, 2)], evil_dir, FAST)
    required = dataclasses.replace(FAST, kernel_isolation=True)
    if (tried.filesystem, tried.processes) == ("read-only", "namespace"):
        assert run_sequences([one_call("add", 1, 2)], evil_dir, required)[0].ok
    else:  # where the kernel refuses, requiring it is one clear error, and trying it is not
        assert tried.ok and tried.filesystem and tried.processes
        with pytest.raises(SandboxError, match="kernel isolation was required"):
            run_sequences([one_call("add", 1, 2)], evil_dir, required)


def test_a_sample_that_writes_to_the_result_channel_is_charged_and_the_batch_goes_on(evil_dir):
    """What the sandbox does not write (a line that is not one of its events, a fatal error once it runs, a
    result out of sequence, a line longer than any result can be) ends the child; the sample that last started is
    charged with ``protocol``, the next ones run in a fresh child."""

    jobs = [one_call("forge_the_next_result", 1), one_call("raises", 1, gold="3"),  # the first of its child
            one_call("write_to_the_parent", "not json\n"), one_call("add", 1, 2, gold="3"),
            one_call("write_to_the_parent", '{"event": "fatal", "detail": "forged"}\n'), one_call("add", 2, 2),
            one_call("write_to_the_parent", "x" * (3 << 20)), one_call("add", 3, 3)]
    results = run_sequences(jobs, evil_dir, dataclasses.replace(FAST, max_result_chars=1000))
    assert [(r.status, r.reason) for r in results] == [("crashed", "protocol"), ("error", "exception")] + [
        ("crashed", "protocol"), ("ok", None)] * 3
    assert results[1].win_corrected is False and results[3].win_corrected is True
    assert "out of sequence" in results[0].detail and "not JSON" in results[2].detail
    assert "longer than" in results[6].detail


def test_a_forged_result_without_its_values_is_charged_not_passed_on(evil_dir, monkeypatch):
    """An ``ok`` result with no answer, or results without values, is no result the child writes: it was a
    sample's. (Passed on, it made building the executed row fail with a raw KeyError.) A result that still
    cannot be read becomes that row's typed error."""
    from tooluse_datasets.builders.nestful import executed

    (result,) = run_sequences([one_call("forge_a_malformed_result", 1)], evil_dir, FAST)
    assert (result.status, result.reason) == ("crashed", "protocol")
    call = {"id": "$var_1", "type": "function", "function": {"name": "add", "arguments": {"arg_0": 1, "arg_1": 2}}}
    row = {"id": "r", "tools": [], "messages": [{"role": "user", "content": "q"},
                                                {"role": "assistant", "content": "", "tool_calls": [call]}],
           "meta": {"gold_answer": 3}, "call_graph": [], "source": "nestful", "subset": "math"}
    monkeypatch.setattr(executed, "execution_job", lambda row: one_call("add", 1, 2))
    monkeypatch.setattr(executed, "run_sequences", lambda jobs, folder, limits: [SequenceResult("ok", results=[{}])])
    (out,) = executed.execute_rows([row], functions_dir=evil_dir)
    assert isinstance(out, ExecutionError) and "cannot be read" in out.message


def test_a_caller_with_a_thousand_files_open_still_runs_the_sandbox(evil_dir):
    """The result pipe then gets a descriptor numbered past 1023, which select() refuses (poll does not)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"this process may open {hard} files, too few to reach descriptor 1024")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        (result,) = run_sequences([one_call("add", 1, 2, gold="3")], evil_dir, FAST)
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert result.ok and result.win_upstream is True


def test_a_sample_that_dribbles_bytes_on_the_channel_is_still_killed_in_time(evil_dir):
    """The watchdog's deadline is absolute: bytes without an end of line do not push it back."""
    started = time.monotonic()
    (result,) = run_sequences([one_call("dribble", 12)], evil_dir, SandboxLimits(timeout=2, grace=1, memory_mb=1024))
    assert (result.status, result.reason) == ("limit", "timeout") and "killed after 3 s" in result.detail
    assert time.monotonic() - started < 8


def test_an_answer_compared_with_the_gold_runs_under_the_timer_and_the_refusals(evil_dir):
    """The win check compares the answer with the gold (upstream's ``==``), which runs the answer's own ``__eq__``:
    that ran after the timer was stopped and the refusals were read, so a network access there went unreported
    (``ok``, and a win), and an endless loop there ran until the parent killed the sandbox."""
    network, loop = run_sequences([one_call("compares_by_its_own", "network", gold="1"),
                                   one_call("compares_by_its_own", "loop", gold="1")], evil_dir, FAST)
    assert (network.status, network.reason, network.win_upstream) == ("refused", "network", False)
    assert (loop.status, loop.reason, loop.win_upstream) == ("limit", "timeout", False)
    assert "swallowed" in loop.detail  # the timer stopped it (every 0.2 s), not the parent's kill
    assert network.failed_call == loop.failed_call == 0  # the answer is the last call's, not a call past the end


def test_endless_loops_are_stopped_whether_or_not_they_swallow_the_timer(evil_dir):
    started = time.monotonic()
    results = run_sequences([one_call("loop_forever", 1), one_call("loop_swallowing_the_timer", 1),
                             one_call("add", 1, 2, gold="3")], evil_dir, FAST)
    assert [(r.status, r.reason) for r in results] == [("limit", "timeout"), ("limit", "timeout"), ("ok", None)]
    assert "killed after" in results[1].detail  # the parent's watchdog, then a new child for the rest
    assert results[2].win_upstream is True
    assert time.monotonic() - started < 15


def test_a_timer_signal_handled_after_the_sample_stopped_leaves_a_timeout(evil_dir):
    """The timer repeats until it is stopped; a signal that came while a timed-out sample's memory was freed was
    handled while the outcome was recorded, and ended the sample's process: a crash with the sandbox's own
    traceback (exit status 70) instead of a timeout, and no win check (upstream's counts False == 0 a win)."""
    results = run_sequences([one_call("free_slowly_when_stopped", 500_000, gold="0"), one_call("add", 1, 2, gold="3")],
                            evil_dir, FAST)
    assert [(r.status, r.reason) for r in results] == [("limit", "timeout"), ("ok", None)]
    assert results[0].win_upstream is True and results[0].win_corrected is False


def test_a_batch_may_run_longer_than_the_sandbox_may_stay_silent(evil_dir, monkeypatch):
    """The silence allowed outside a sample (starting up, between samples, exiting) is counted from the last
    thing the sandbox said, not from the batch's start: a batch longer than that limit is not "a sandbox that
    did not start". The limit is lowered here so that two 0.9 s samples outlast it."""
    from tooluse_datasets.builders.nestful.execution import sandbox

    monkeypatch.setattr(sandbox, "IDLE_SECONDS", 1.5)
    limits = SandboxLimits(timeout=5, cpu_seconds=5, grace=5, memory_mb=1024)
    results = run_sequences([one_call("nap", 0.9, gold="0.9"), one_call("nap", 0.9, gold="0.9")], evil_dir, limits)
    assert [(r.status, r.win_corrected) for r in results] == [("ok", True), ("ok", True)]


def test_a_sandbox_that_does_not_exit_after_its_last_result_keeps_the_results(evil_dir, monkeypatch):
    """A child that does not exit after its last result (here an exit hook a sample registered) is killed once
    it has been silent too long, and the results it sent count (not a SandboxError for the whole batch)."""
    from tooluse_datasets.builders.nestful.execution import sandbox

    monkeypatch.setattr(sandbox, "IDLE_SECONDS", 3.0)  # also the time the child has to start: a loaded machine
    started = time.monotonic()
    results = run_sequences([one_call("add", 1, 2, gold="3"), one_call("delay_the_exit", 20, gold="20")],
                            evil_dir, FAST)
    assert [(r.status, r.win_corrected) for r in results] == [("ok", True), ("ok", True)]
    assert time.monotonic() - started < 15


def test_a_sample_whose_process_does_not_end_after_its_result_keeps_it_and_blames_no_other(evil_dir, monkeypatch):
    """The sandbox waits for a sample's process to end before the next sample: one that hangs after its result
    (here stopped by the output it left) is killed once the sandbox has been silent too long. Its result stands, and the
    next sample runs in a fresh sandbox rather than being charged with the silence."""
    from tooluse_datasets.builders.nestful.execution import sandbox

    monkeypatch.setattr(sandbox, "IDLE_SECONDS", 3.0)
    results = run_sequences([one_call("hang_after_the_result", 1, gold="1"), one_call("add", 1, 2, gold="3")],
                            evil_dir, FAST)
    assert [(r.status, r.win_corrected) for r in results] == [("ok", True), ("ok", True)]


def test_a_sample_whose_process_does_not_end_after_its_result_is_ended_promptly(evil_dir, monkeypatch):
    """After a sample's result only its process's exit and the worker's clean-up remain: the sandbox waits
    ENDING_SECONDS for them, not the idle limit meant for a slow start (60 s, raised here so that waiting for it
    shows). Every result stands, the hanging sample's and those of the samples around it."""
    from tooluse_datasets.builders.nestful.execution import sandbox

    monkeypatch.setattr(sandbox, "IDLE_SECONDS", 40.0)
    started = time.monotonic()
    results = run_sequences([one_call("add", 1, 2, gold="3"), one_call("hang_after_the_result", 7, gold="7"),
                             one_call("add", 2, 2, gold="4")], evil_dir, FAST)
    seconds = time.monotonic() - started
    assert [(r.status, r.answer["value"], r.win_corrected) for r in results] == [("ok", 3, True), ("ok", 7, True),
                                                                                ("ok", 4, True)]
    assert seconds < 20, seconds


def test_a_thread_left_running_cannot_write_in_the_next_samples_folder(evil_dir):
    """The write policy is per process: each sample runs in a process of its own, which ends with the sample and
    its threads, so no thread of the first plants a file in the next sample's folder."""
    results = run_sequences([one_call("leave_a_writer", "planted.txt", 0.1),
                             one_call("look_later", "planted.txt", 0.4), one_call("add", 1, 2, gold="3")],
                            evil_dir, FAST)
    assert [(r.status, r.reason) for r in results] == [("ok", None)] * 3
    assert results[1].answer["value"] is False and results[2].win_corrected


def test_a_thread_the_threading_module_does_not_count_ends_the_child_too(evil_dir):
    """A thread of _thread.start_new_thread (not in threading.active_count()) ends with its sample's process too."""
    results = run_sequences([one_call("leave_a_raw_writer", "planted.txt", 0.1),
                             one_call("look_later", "planted.txt", 0.4)], evil_dir, FAST)
    assert [(r.status, r.reason) for r in results] == [("ok", None)] * 2
    assert results[1].answer["value"] is False


def test_an_interrupt_in_the_caller_ends_the_sandbox_at_once(evil_dir, marked):
    """Ctrl-C while a sample runs: the sandbox is killed before it is waited for, not left to finish its sample."""
    import signal

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 1.0)
    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            run_sequences([one_call("loop_forever", 1)], evil_dir,
                          SandboxLimits(timeout=30, cpu_seconds=30, grace=5, memory_mb=1024))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert time.monotonic() - started < 5
    assert alive_after_kill(marked) == []


# A caller of run_sequences in a process of its own, with the mark of `marked` in its sandbox's environment.
KILLED_CALLER = """
import sys, tempfile
from tooluse_datasets.builders.nestful.execution import sandbox
mark, folder, isolation = sys.argv[1], sys.argv[2], {"none": None, "off": False}[sys.argv[3]]
tempfile.tempdir = sys.argv[4]  # (a killed caller cannot remove its sandbox's folder: the test's keeps it)
clean = sandbox.clean_environment
sandbox.clean_environment = lambda root: dict(clean(root), NESTFUL_TEST_MARK=mark)
job = sandbox.SequenceJob([{"name": "nap", "label": "$var_1", "arguments": {"arg_0": 600}}], {"nap": ["result"]})
sandbox.run_sequences([job], folder, sandbox.SandboxLimits(timeout=900, grace=60, memory_mb=1024,
                                                           kernel_isolation=isolation, network_namespace=isolation))
"""


@pytest.mark.parametrize("isolation", ["none", "off"])
def test_a_caller_killed_while_a_sample_runs_takes_the_sandbox_with_it(evil_dir, isolation, tmp_path):
    """The caller is the sandbox's watchdog: killed (SIGKILL, or SIGTERM, which a job scheduler sends and Python
    does not catch) while a sample ran, it left the sandbox running that sample for as long as the sample liked,
    out of its process group and session, whatever the timeout."""
    import uuid

    mark = uuid.uuid4().hex
    caller = subprocess.Popen([sys.executable, "-c", KILLED_CALLER, mark, str(evil_dir), isolation, str(tmp_path)],
                              cwd="/")
    try:
        deadline = time.monotonic() + 60
        while len(alive(f"NESTFUL_TEST_MARK={mark}")) < 2 and time.monotonic() < deadline:  # (the sample's process)
            time.sleep(0.05)
        assert len(alive(f"NESTFUL_TEST_MARK={mark}")) >= 2, "the sandbox did not start its sample"
    finally:
        caller.kill()
        caller.wait()
    left = alive_after_kill(f"NESTFUL_TEST_MARK={mark}")
    for pid in left:  # (not to leave them running when the test fails)
        with contextlib.suppress(OSError):
            os.kill(pid, 9)
    assert left == []


def batch_roots(folder) -> set:
    """The sandbox batch folders under ``folder``, wherever the sandbox puts them (each holds a child's log)."""
    return {str(log.parent) for log in folder.glob("**/child-*.log")}


def start_caller(mark, evil_dir, isolation, folder):
    caller = subprocess.Popen([sys.executable, "-c", KILLED_CALLER, mark, str(evil_dir), isolation, str(folder)],
                              cwd="/")
    deadline = time.monotonic() + 60
    while len(alive(f"NESTFUL_TEST_MARK={mark}")) < 2 and time.monotonic() < deadline:  # (the sample's process)
        time.sleep(0.05)
    assert len(alive(f"NESTFUL_TEST_MARK={mark}")) >= 2, "the sandbox did not start its sample"
    return caller


@pytest.mark.parametrize("signal_name, isolation", [("SIGKILL", "none"), ("SIGTERM", "off")])
def test_the_folder_of_a_killed_caller_is_removed_by_the_next_sandbox_and_a_live_callers_kept(
        evil_dir, signal_name, isolation, tmp_path, monkeypatch):
    """A caller killed outright (SIGKILL, or SIGTERM, which Python does not catch: a script's td.load(...,
    execute=True) stopped by a job scheduler) cannot remove its sandbox's folder: each such folder stayed in the
    temporary folder for good. The next sandbox started removes it, and never the folder of a caller still
    running, which goes on with its sample."""
    import signal
    import uuid

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # (where the callers' sandboxes put theirs too)
    marks, callers = [uuid.uuid4().hex, uuid.uuid4().hex], []
    try:
        callers.append(start_caller(marks[0], evil_dir, isolation, tmp_path))
        (killed_root,) = batch_roots(tmp_path)
        callers.append(start_caller(marks[1], evil_dir, isolation, tmp_path))
        (live_root,) = batch_roots(tmp_path) - {killed_root}
        callers[0].send_signal(getattr(signal, signal_name))
        assert callers[0].wait(timeout=30) == -getattr(signal, signal_name)
        assert alive_after_kill(f"NESTFUL_TEST_MARK={marks[0]}") == []
        assert batch_roots(tmp_path) == {killed_root, live_root}  # (what it left)
        (result,) = run_sequences([one_call("add", 1, 2, gold="3")], evil_dir, FAST)
        assert result.ok
        assert batch_roots(tmp_path) == {live_root}
        assert len(alive(f"NESTFUL_TEST_MARK={marks[1]}")) >= 2 and callers[1].poll() is None
    finally:
        for caller in callers:
            caller.kill()
            caller.wait()
        for mark in marks:
            for pid in alive_after_kill(f"NESTFUL_TEST_MARK={mark}"):
                with contextlib.suppress(OSError):
                    os.kill(pid, 9)
    run_sequences([one_call("add", 1, 2)], evil_dir, FAST)
    assert batch_roots(tmp_path) == set()


def process_id_scope() -> str:
    """What names this machine's boot and PID namespace in the sandbox's batch folder names."""
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip().replace("-", "")
    return f"{boot}." + "".join(filter(str.isdigit, os.readlink("/proc/self/ns/pid")))


def test_only_folders_of_callers_that_no_longer_run_are_removed(evil_dir, tmp_path, monkeypatch):
    """A batch folder is its caller's while that process runs: told by its process id and start time (a later
    process given the same id, or a zombie, is not it), in this PID namespace (another's ids mean nothing here)."""
    from tooluse_datasets.builders.nestful.execution import sandbox

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    run_sequences([one_call("add", 1, 2)], evil_dir, FAST)  # (makes the parent)
    parent = tmp_path / f"nestful-sandboxes-{os.geteuid()}"
    assert parent.is_dir() and stat.S_IMODE(parent.stat().st_mode) == 0o700 and not list(parent.iterdir())
    namespace = process_id_scope()
    running = subprocess.Popen(["sleep", "60"])
    ended = subprocess.Popen(["true"])  # (not waited for until the end: a zombie)
    try:
        while not open(f"/proc/{ended.pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z":
            time.sleep(0.01)
        start = open(f"/proc/{running.pid}/stat").read().rsplit(")", 1)[1].split()[19]
        kept = [f"{namespace}-{running.pid}-{start}-abc", namespace.split(".")[0] + ".1-1-1-abc",
                "f" * 32 + "." + namespace.split(".")[1] + "-1-1-abc", "not-a-batch", "7-x"]
        removed = [f"{namespace}-{running.pid}-{int(start) + 1}-abc", f"{namespace}-{ended.pid}-1-abc",
                   f"{namespace}-{2**22 + 1}-1-abc"]
        for name in kept + removed:
            (parent / name / "work").mkdir(parents=True)
            (parent / name / "work" / "left.txt").write_text("left")
        (parent / f"{namespace}-{2**22 + 2}-1-link").symlink_to(tmp_path / removed[0])  # (a link: not followed)
        (result,) = run_sequences([one_call("add", 1, 2, gold="3")], evil_dir, FAST)
        assert result.ok
        assert sorted(p.name for p in parent.iterdir()) == sorted(kept + [f"{namespace}-{2**22 + 2}-1-link"])
    finally:
        running.kill()
        running.wait()
        ended.wait()
    assert sandbox._start_time(running.pid) is None


# A caller in a PID namespace of its own whose /proc is the outer namespace's (argv: the temporary folder): its own
# batch folder, named as the sandbox names it (its id here, its start time), is looked for by the next batch.
FOREIGN_PROC = """
import os, sys, tempfile
from tooluse_datasets.builders.nestful.execution import sandbox
tempfile.tempdir = sys.argv[1]
assert os.readlink("/proc/self") != str(os.getpid())  # (the outer namespace's /proc)
start = open("/proc/self/stat").read().rsplit(")", 1)[1].split()[19]
boot = open("/proc/sys/kernel/random/boot_id").read().strip().replace("-", "")
namespace = boot + "." + "".join(filter(str.isdigit, os.readlink("/proc/self/ns/pid")))
parent = os.path.join(sys.argv[1], f"nestful-sandboxes-{os.geteuid()}")
mine = os.path.join(parent, f"{namespace}-{os.getpid()}-{start}-abc")
os.mkdir(parent, 0o700)
os.mkdir(mine)
with sandbox._batch_folder():
    pass
print("kept" if os.path.isdir(mine) else "removed")
"""


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="a PID namespace is made by root")
def test_a_live_callers_folder_is_kept_where_proc_is_of_another_pid_namespace(tmp_path):
    """``unshare --pid`` without ``--mount-proc`` (or a container given the host's /proc): /proc/<id> is another
    process than this namespace's process of that id, so a live caller's folder was judged by a stranger's start
    time and removed. Where /proc is not of its namespace the sandbox goes by no process ids."""
    done = subprocess.run(["unshare", "--pid", "--fork", sys.executable, "-c", FOREIGN_PROC, str(tmp_path)],
                          capture_output=True, text=True, timeout=120, cwd="/")
    if done.returncode != 0 and "unshare" in done.stderr:
        pytest.skip(f"no PID namespace here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "kept"


# A caller whose batch folder is made and kept while it sleeps (argv: the temporary folder).
NAPPING_CALLER = """
import sys, tempfile, time
from tooluse_datasets.builders.nestful.execution import sandbox
tempfile.tempdir = sys.argv[1]
with sandbox._batch_folder() as root:
    print(root, flush=True)
    time.sleep(600)
"""


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="another boot id is mounted by root")
def test_the_folder_of_a_caller_on_another_machine_sharing_the_temporary_folder_is_kept(tmp_path, monkeypatch):
    """A temporary folder on NFS is shared by machines whose first PID namespace has the same number: a caller on
    another one, its id not running here, had its folder removed while it ran. The folder names the machine's boot
    too (another machine is simulated by a caller that sees another boot id), and only this one's are judged."""
    boot = tmp_path / "boot_id"
    boot.write_text("0123456789abcdef0123456789abcdef\n")
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    caller = subprocess.Popen(["unshare", "--mount", "sh", "-c",
                               f"mount --bind {boot} /proc/sys/kernel/random/boot_id && exec \"$0\" -c \"$1\" \"$2\"",
                               sys.executable, NAPPING_CALLER, str(temporary)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd="/")
    try:
        root = caller.stdout.readline().strip()
        if not root:
            pytest.skip(f"no mount namespace here: {caller.stderr.read().strip()}")
        assert os.path.isdir(root)
    finally:
        caller.kill()  # (its id no longer runs here, as another machine's would not)
        caller.wait()
    from tooluse_datasets.builders.nestful.execution import sandbox

    with sandbox._batch_folder() as mine:
        assert os.path.dirname(mine) == os.path.dirname(root)
    assert os.path.isdir(root)


@pytest.mark.skipif(os.geteuid() != 0, reason="a folder of another user is made by root")
def test_another_users_folder_where_the_sandbox_puts_its_own_is_left_alone(evil_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    parent = tmp_path / f"nestful-sandboxes-{os.geteuid()}"
    parent.mkdir(mode=0o700)
    namespace = process_id_scope()
    dead = parent / f"{namespace}-{2**22 + 1}-1-abc"  # (a name the sandbox would remove, were the folder its user's)
    dead.mkdir()
    os.chown(parent, 12345, 12345)
    (result,) = run_sequences([one_call("add", 1, 2, gold="3")], evil_dir, FAST)
    assert result.ok and dead.is_dir()
    assert list(tmp_path.glob("nestful-sandbox-*")) == []  # (its own folder, elsewhere, removed as it ended)


# A caller of run_sequences as another user (argv: functions folder, temporary folder, the function to run).
CALLER_AS = """
import sys, tempfile
from tooluse_datasets.builders.nestful.execution import sandbox
tempfile.tempdir = sys.argv[2]
job = sandbox.SequenceJob([{"name": sys.argv[3], "label": "$var_1", "arguments": {}}], {sys.argv[3]: ["result"]})
limits = sandbox.SandboxLimits(timeout=900, grace=60, memory_mb=1024, kernel_isolation=False, network_namespace=False)
print(sandbox.run_sequences([job], sys.argv[1], limits)[0].status, flush=True)
"""
LOCKING = """
import os, time

def lock_and_nap():
    os.makedirs("locked/deeper")
    with open("locked/deeper/data", "w") as f:
        f.write("data")
    os.chmod("locked/deeper", 0o500)
    os.chmod("locked", 0)
    os.chmod(".", 0o500)
    time.sleep(600)

def quick():
    return 1
"""


AS_NOBODY = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"]


def reachable_by_others(path: str) -> bool:
    """Whether a user with no permission of its own may execute ``path`` (every folder on the way searchable)."""
    real = Path(os.path.realpath(path))
    return all(p.stat().st_mode & stat.S_IXOTH for p in [real, *real.parents])


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                    reason="the callers run as another user, which root starts with setpriv")
@pytest.mark.skipif(not reachable_by_others(sys.executable),
                    reason=f"another user cannot run this interpreter ({os.path.realpath(sys.executable)})")
def test_a_killed_callers_folder_is_removed_whatever_its_sample_made_read_only(tmp_path):
    """Not root, a caller cannot remove folders that lost their write permission without giving it back first: a
    killed caller's sample (no kernel isolation, so its folder is on disk) that locked its folders left them."""
    import signal

    shared = Path(tempfile.mkdtemp(prefix="nestful-test-"))  # (one the other user reaches: not under root's 0700)
    try:
        shared.chmod(0o755)
        functions, temporary = shared / "functions", shared / "tmp"
        functions.mkdir()
        (functions / "basic_functions.py").write_text("")
        (functions / "locking.py").write_text(LOCKING)
        (functions / "func_file_map.json").write_text(json.dumps({"lock_and_nap": "locking.py", "quick": "locking.py"}))
        temporary.mkdir()
        os.chown(temporary, 65534, 65534)

        def caller(name):
            return subprocess.Popen([*AS_NOBODY, sys.executable, "-c", CALLER_AS, str(functions), str(temporary), name],
                                    cwd="/", stdout=subprocess.PIPE, text=True)

        killed = caller("lock_and_nap")
        try:
            deadline = time.monotonic() + 60
            while not list(temporary.glob("**/locked")) and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.2)
        finally:
            killed.send_signal(signal.SIGKILL)
            killed.wait()
        (locked,) = temporary.glob("**/locked")
        assert stat.S_IMODE(locked.stat().st_mode) == 0 and batch_roots(temporary)
        time.sleep(0.5)  # (its sandbox, and the sample, die with it)
        after = caller("quick")
        assert after.communicate(timeout=120)[0].strip() == "ok" and after.returncode == 0
        assert batch_roots(temporary) == set() and not list(temporary.glob("**/locked"))
    finally:
        subprocess.run(["chmod", "-R", "u+rwx", str(shared)], check=False)
        shutil.rmtree(shared, ignore_errors=True)


def test_a_hanging_sample_in_a_session_of_its_own_ends_with_the_batch_without_kernel_isolation(evil_dir, marked):
    """Each sample runs in a process forked from the sandbox's, which may leave the process group the sandbox
    is killed by (os.setsid raises no audit event): it dies with the process it was forked from."""

    limits = dataclasses.replace(FAST, kernel_isolation=False, network_namespace=False)
    results = run_sequences([one_call("leave_the_group_and_hang", 1), one_call("add", 1, 2, gold="3")], evil_dir,
                            limits)
    assert [(r.status, r.reason) for r in results] == [("limit", "timeout"), ("ok", None)]
    time.sleep(0.5)
    assert alive(marked) == []


def test_the_cpu_limit_ends_a_sample_that_outlives_its_timer(evil_dir):
    limits = SandboxLimits(timeout=30, cpu_seconds=1, grace=30, memory_mb=1024)
    (result,) = run_sequences([one_call("burn_cpu_swallowing", 1)], evil_dir, limits)
    assert (result.status, result.reason) == ("limit", "timeout") and "SIGXCPU" in result.detail


def test_a_sample_stopped_by_the_cpu_limit_or_killed_past_its_timer_is_win_checked_as_a_timeout(evil_dir):
    """A sample the CPU limit or the parent's kill stops is a failed execution like one its timer stops: upstream's
    check (False == 0) wins against a gold 0, the corrected one does not. Both had no win check (None), so the
    official win rate of a gold-0 row depended on which limit stopped its prediction."""
    cpu = SandboxLimits(timeout=30, cpu_seconds=1, grace=30, memory_mb=1024)
    results = run_sequences([one_call("burn_cpu_swallowing", 1, gold="0"), one_call("burn_cpu_swallowing", 1, gold="1")],
                            evil_dir, cpu)
    results += run_sequences([one_call("loop_swallowing_the_timer", 1, gold="0.0")], evil_dir, FAST)
    assert "SIGXCPU" in results[0].detail and "killed after" in results[2].detail
    assert [(r.status, r.reason, r.win_upstream, r.win_corrected) for r in results] == [
        ("limit", "timeout", True, False), ("limit", "timeout", False, False), ("limit", "timeout", True, False)]


def test_a_process_a_sample_leaves_holding_the_result_channel_does_not_hold_up_the_batch(evil_dir):
    """Without kernel isolation nothing ends a process a sample forked through native code: it holds the child's end
    of the result channel, and the batch waited for that end of file for the idle limit (60 s) after its last sample,
    which took milliseconds. The child's exit ends the batch; the process goes with the child's process group."""
    limits = dataclasses.replace(FAST, kernel_isolation=False, network_namespace=False)
    started = time.monotonic()
    (result,) = run_sequences([one_call("fork_through_libc_and_stay", 120)], evil_dir, limits)
    assert result.ok and time.monotonic() - started < 30
    time.sleep(0.5)
    assert not _running(result.answer["value"])


def _running(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] not in ("Z", "X")  # (a zombie has ended)
    except OSError:
        return False


def test_a_longer_timeout_gives_as_many_cpu_seconds_unless_they_are_set(evil_dir):
    # SandboxLimits(timeout=30) used to keep the default 10 CPU seconds: score(), verify() and run_sequences()
    # stopped a CPU-bound sample at a third of the time asked for (the CLI and td.load never went below the timer)
    longer = SandboxLimits(timeout=30, grace=0.6, memory_mb=1024)
    assert (longer.cpu_limit, SandboxLimits().cpu_limit, SandboxLimits(timeout=2.4).cpu_limit) == (30, 10, 3)
    assert dataclasses.replace(SandboxLimits(), timeout=30).cpu_limit == 30  # not the default's 10 copied
    assert SandboxLimits(timeout=30, cpu_seconds=2).cpu_limit == 2
    (result,) = run_sequences([one_call("cpu_budget_left", 0)], evil_dir, longer)
    assert result.ok and 29 < result.answer["value"] < 31  # (the budget counts from the CPU used, rounded up)
    (result,) = run_sequences([one_call("cpu_budget_left", 0)], evil_dir, SandboxLimits(timeout=30, cpu_seconds=2))
    assert result.ok and result.answer["value"] < 3


def test_crashes_kill_the_child_not_the_caller_and_the_batch_goes_on(evil_dir):
    jobs = [one_call("segfault", 1), one_call("hard_exit", 3), one_call("eat_memory", 4 << 30),
            one_call("exits", 2), one_call("raises", 1, gold="0"), one_call("add", 2, 3, gold="5")]
    results = run_sequences(jobs, evil_dir, FAST)
    assert [(r.status, r.reason) for r in results] == [
        ("crashed", "crash"), ("crashed", "crash"), ("limit", "memory"), ("error", "exception"),
        ("error", "exception"), ("ok", None)]
    assert "SIGSEGV" in results[0].detail and "status 3" in results[1].detail
    # Upstream's bug: a failed execution is False, and False == 0 counts as a win; the corrected check does not.
    assert (results[4].win_upstream, results[4].win_corrected) == (True, False)
    assert results[5].answer["value"] == 5


def test_an_exception_without_a_message_is_named_alone(evil_dir):
    # A bare assert failing (upstream's functions hold some) was detailed 'asserts: AssertionError: ', an empty reason
    assertion, value_error = run_sequences([one_call("asserts", 2), one_call("raises_with", "")], evil_dir, FAST)
    assert (assertion.reason, assertion.detail) == ("exception", "asserts: AssertionError")
    assert value_error.detail == "raises_with: ValueError"


# Modules of our own whose top level needs more memory than the sandbox allows (1024 MB in these tests): directly,
# and wrapped in an ImportError as libraries wrap a dependency's failure (pandas: "Unable to import required
# dependency numpy"); and one that fails to load for another reason.
GREEDY_MODULES = {
    "greedy_tables.py": "TABLE = bytearray(2 << 30)\n\ndef greedy_tables(x):\n    return x\n",
    "wrapped_tables.py": ("try:\n    TABLE = bytearray(2 << 30)\nexcept MemoryError as exc:\n"
                          "    raise ImportError('wrapped_tables needs its tables') from exc\n\n"
                          "def wrapped_tables(x):\n    return x\n"),
    "missing_dependency.py": "import no_such_module_anywhere\n\ndef missing_dependency(x):\n    return x\n",
}


def test_a_module_that_runs_out_of_memory_while_loading_is_the_memory_limit_naming_the_module(tmp_path):
    # It used to be "import_error" when a library wrapped the MemoryError (a limit read as a broken module), and
    # "over 1024 MB" with nothing saying the module's own top level took it.
    (tmp_path / "basic_functions.py").write_text("def add(a, b):\n    return a + b\n")
    for file_name, code in GREEDY_MODULES.items():
        (tmp_path / file_name).write_text(code)
    (tmp_path / "func_file_map.json").write_text(json.dumps({f[:-3]: f for f in GREEDY_MODULES}))
    jobs = [dataclasses.replace(after_a_sum(name, "$var_1.result$"), gold="3")
            for name in ("greedy_tables", "wrapped_tables", "missing_dependency")]
    greedy, wrapped, missing = run_sequences(jobs, tmp_path, dataclasses.replace(FAST, timeout=10))
    for result, file_name in ((greedy, "greedy_tables.py"), (wrapped, "wrapped_tables.py")):
        assert (result.status, result.reason, result.failed_call) == ("limit", "memory", 1), result.describe()
        assert result.detail.startswith(f"over 1024 MB while loading {file_name} (MemoryError")
        assert result.win_upstream is False and result.win_corrected is False
    # A module that cannot load for another reason is still an import error.
    assert (missing.status, missing.reason, missing.failed_call) == ("error", "import_error", 1)
    assert "missing_dependency.py" in missing.detail and "no_such_module_anywhere" in missing.detail


# A module of our own that loads as a native library does when it cannot reserve its buffers (OpenBLAS while numpy
# loads): malloc returns NULL under RLIMIT_AS, the library says so on stderr and ends the process itself.
NATIVE_GREEDY_MODULE = """
import ctypes, os, sys
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
if not libc.malloc(2 << 30):
    sys.stderr.write("native_tables error: Memory allocation still failed after 10 retries, giving up.\\n")
    sys.stderr.flush()
    os._exit(1)

def native_tables(x):
    return x
"""


def test_a_native_library_ending_the_process_for_want_of_memory_is_the_memory_limit(tmp_path):
    # It was a crash ("the sandbox process exited with status 1"), as if the code were broken; numpy's import under
    # --memory-mb 80 ends so (OpenBLAS). The log is quoted as before.
    (tmp_path / "basic_functions.py").write_text("def add(a, b):\n    return a + b\n")
    (tmp_path / "native_tables.py").write_text(NATIVE_GREEDY_MODULE)
    (tmp_path / "func_file_map.json").write_text(json.dumps({"native_tables": "native_tables.py"}))
    jobs = [dataclasses.replace(after_a_sum("native_tables", "$var_1.result$"), gold="3"), after_a_sum("add", 2, 3)]
    greedy, after = run_sequences(jobs, tmp_path, dataclasses.replace(FAST, timeout=10))
    assert (greedy.status, greedy.reason, greedy.failed_call) == ("limit", "memory", 1), greedy.describe()
    assert greedy.detail.startswith("native_tables: over 1024 MB: the sandbox process exited with status 1; log: ")
    assert "Memory allocation still failed" in greedy.detail and not greedy.win_upstream
    assert after.ok and after.answer["value"] == 5  # the batch goes on


def after_a_sum(name, *args):
    """A two-call sequence whose second call is ``name``: add(1, 2), then name(*args)."""
    calls = [{"name": "add", "label": "$var_1", "arguments": {"a": 1, "b": 2}},
             {"name": name, "label": "$var_2", "arguments": {f"arg_{i}": a for i, a in enumerate(args)}}]
    return SequenceJob(calls, {"add": ["result"], name: ["result"]})


def test_a_sample_that_kills_the_sandbox_is_charged_to_the_call_that_was_running(evil_dir):
    """A crash, a kill past the timer and the CPU limit end the sandbox process, so no result of the child says
    which call ran: the parent follows the calls as they start. (The failure used to name no call: the row's error
    field was ``output`` instead of ``output[1]``.)"""

    cpu = dataclasses.replace(FAST, timeout=30, cpu_seconds=1, grace=30)
    results = run_sequences([after_a_sum("segfault", 1), after_a_sum("hard_exit", 3),
                             after_a_sum("loop_swallowing_the_timer", 1)], evil_dir, FAST)
    results += run_sequences([after_a_sum("burn_cpu_swallowing", 1)], evil_dir, cpu)
    assert [(r.status, r.reason, r.failed_call) for r in results] == [
        ("crashed", "crash", 1), ("crashed", "crash", 1), ("limit", "timeout", 1), ("limit", "timeout", 1)]
    for result, name in zip(results, ["segfault", "hard_exit", "loop_swallowing_the_timer", "burn_cpu_swallowing"]):
        assert result.detail.startswith(f"{name}: "), result.detail
    assert "SIGSEGV" in results[0].detail and "status 3" in results[1].detail and "SIGXCPU" in results[3].detail
    # The executed row's error names the call, as for any other failure.
    assert execution_error(results[0]).field == "output[1]"


PATCH_ISQRT = "__import__('math').__setattr__('isqrt', lambda n: 0) or 'patched'"


def test_what_a_sample_changes_in_the_interpreter_does_not_reach_the_next_one(real_rows, functions_dir):
    """Upstream's functions run in the sandbox's interpreter and may change it: a prediction calling upstream's
    eval-based is_string_value can patch the math module basic_functions.py imports. A row's outcome must not
    depend on which samples ran before it in its batch (it did: the gold row calling sqrt then divided by 0)."""
    row = next(r for r in real_rows if r["meta"]["sample_id"] == "6ae58ffa-f086-4aa5-9bc9-e2beeec685cc")
    patch = SequenceJob([{"name": "is_string_value", "label": "$var1", "arguments": {"variable_name": PATCH_ISQRT}}],
                        {"is_string_value": ["result"]})
    (alone,) = run_sequences([execution_job(row)], functions_dir)
    assert alone.ok and alone.win_upstream
    results = run_sequences([patch, execution_job(row)], functions_dir)
    assert results[0].ok and results[0].answer["value"] is True  # the patch ran
    assert (results[1].status, results[1].reason, results[1].answer) == (alone.status, alone.reason, alone.answer)
    assert results[1].win_upstream


def test_an_argument_upstream_cannot_write_as_text_fails_the_sequence_there(real_rows, functions_dir):
    """Upstream's executor writes every argument with str() before the call: an integer past Python's 4,300-digit
    limit for int -> str (a runaway prediction computes one: power(10, 5000)) fails the sequence at the call that
    receives it, as in upstream's scorer, whatever that call would return; a smaller one goes through."""
    from tooluse_datasets.builders.nestful.specs import output_fields

    tools = [t for r in real_rows for t in r["tools"] if t["function"]["name"] in ("power", "remainder")]
    fields = output_fields(tools)
    assert set(fields) == {"power", "remainder"}

    def chain(exponent):
        return SequenceJob([{"name": "power", "label": "$var_1", "arguments": {"arg_0": 10, "arg_1": exponent}},
                            {"name": "remainder", "label": "$var_2",
                             "arguments": {"arg_0": "$var_1.result$", "arg_1": 7}}],
                           fields, json.dumps(10 ** exponent % 7))

    runaway, small = run_sequences([chain(5000), chain(1000)], functions_dir)
    assert (runaway.status, runaway.reason, runaway.failed_call) == ("error", "exception", 1), runaway.describe()
    assert "4300" in runaway.detail and not runaway.win_upstream and not runaway.win_corrected
    assert small.ok and small.answer["value"] == 10 ** 1000 % 7 and small.win_upstream and small.win_corrected


def test_environment_builtins_modules_and_memory_a_sample_leaves_do_not_reach_the_next_one(evil_dir):

    limits = dataclasses.replace(FAST, memory_mb=1024, timeout=10)  # (time to fill 600 MB on a loaded machine)
    results = run_sequences([one_call("leave_state", "x"), one_call("find_state", 1), one_call("hoard", 600),
                             one_call("eat_memory", 600 << 20)], evil_dir, limits)
    assert [(r.status, r.reason) for r in results] == [("ok", None)] * 4, [r.describe() for r in results]
    assert results[1].answer["value"] == [None, False, False]


def test_results_that_are_not_json_values_are_rendered_and_typed(evil_dir):
    results = run_sequences([one_call("returns_tuple", 2, gold="[2, 2]"), one_call("returns_set", 2),
                             one_call("returns_nan", 1), one_call("returns_text", 11, gold="11")], evil_dir, FAST)
    assert results[0].answer == {"value": [2, 2], "python_type": "tuple", "type_name": "tuple",
                                 "python_repr": "(2, 2)"} and results[0].win_upstream
    assert results[1].answer == {"value": [1, 2], "python_type": "set", "type_name": "set", "python_repr": "{1, 2}"}
    assert results[2].answer == {"value": "nan", "python_type": "float", "repr": True, "type_name": "float",
                                 "python_repr": "nan"}
    assert results[3].answer == {"value": "11", "python_type": None, "type_name": "str", "python_repr": "'11'"}
    assert not results[3].win_upstream  # the string "11" is not the number 11


def test_lone_surrogates_in_arguments_results_and_errors_reach_the_caller(evil_dir):
    """A prediction's argument may hold a lone surrogate (JSON allows the escape, UTF-8 cannot encode it): it
    reaches the function as it is, and a result holding one comes back as its repr, as other values JSON text
    cannot carry exactly; an error message holding one comes back with the surrogate escaped."""
    lone = "\ud83d"
    results = run_sequences([one_call("returns_text", lone), one_call("raises_with", f"bad {lone}"),
                             one_call("returns_odd", lone), one_call("add", 1, 2, gold="3")], evil_dir, FAST)
    assert results[0].answer == {"value": "'\\ud83d'", "python_type": "str", "repr": True, "type_name": "str",
                                 "python_repr": "'\\ud83d'"}
    assert (results[1].reason, results[1].detail) == ("exception", "raises_with: ValueError: bad \\ud83d")
    assert results[2].answer == {"value": ["odd \\ud83d", "{'\\ud83d': 1}"], "python_type": "list", "repr": True,
                                 "type_name": "list", "python_repr": "[odd \\ud83d, {'\\ud83d': 1}]"}
    assert results[3].win_corrected is True


def test_a_tool_with_an_empty_output_parameters_object_is_reported_as_having_none(evil_dir):
    # It was "multiple_outputs: tool 'add' has 0 output parameters". Upstream calls the function, then fails the
    # sequence, as it does for several outputs: the call runs first here too.
    calls = [{"name": "add", "label": "$var_1", "arguments": {"a": 1, "b": 2}}]
    empty, several = run_sequences([SequenceJob(calls, {"add": []}, "3"), SequenceJob(calls, {"add": ["a", "b"]}, "3")],
                                   evil_dir, FAST)
    assert (empty.status, empty.reason, empty.failed_call) == ("error", "no_output_parameters", 0)
    assert empty.detail == "tool 'add' has no output parameters (an empty object)" and not empty.win_upstream
    assert (several.status, several.reason, several.detail) == ("error", "multiple_outputs",
                                                                "tool 'add' has 2 output parameters")


def test_executor_semantics_of_references_and_bad_sequences(evil_dir):
    ok = [{"name": "add", "label": "$var_1", "arguments": {"a": 1, "b": 2}},
          {"name": "add", "label": "$var_2", "arguments": {"a": "$var_1.result$", "b": "$var_1.result"}}]
    jobs = [SequenceJob(ok, {"add": ["result"]}, "6"),
            SequenceJob([dict(ok[0]), dict(ok[1], arguments={"a": "$var_9.result$", "b": 1})], {"add": ["result"]}),
            SequenceJob(ok, {"add": ["result", "other"]}), SequenceJob(ok, {"add": None}), SequenceJob(ok, {}),
            SequenceJob([{"name": "nope", "label": "$var_1", "arguments": {}}], {"nope": ["result"]}),
            SequenceJob({"name": "add"}, {"add": ["result"]}, "0"), SequenceJob([], {}, "0")]
    results = run_sequences(jobs, evil_dir, FAST)
    assert [(r.status, r.reason) for r in results] == [
        ("ok", None), ("error", "bad_reference"), ("error", "multiple_outputs"), ("error", "no_output_parameters"),
        ("error", "unknown_tool"), ("error", "unknown_function"), ("error", "malformed_call"), ("error", "no_calls")]
    # Positional arguments; "$var_1.result" (no closing $) is a reference too, as upstream reads it.
    assert [r["value"] for r in results[0].results] == [3, 6]
    assert results[1].failed_call == 1
    # Upstream: a malformed prediction is False (== 0, a "win"); an empty one is not executed (no win).
    assert results[6].win_upstream is True and results[7].win_upstream is False


def test_a_folder_without_the_functions_is_refused(tmp_path):
    with pytest.raises(SandboxError, match="basic_functions.py"):
        run_sequences([one_call("add", 1, 2)], tmp_path)
    with pytest.raises(DataNotFoundError, match="func_file_map.json"):
        executable_functions(tmp_path)


@pytest.mark.parametrize("map_bytes, says", [
    (b"notjson{", "is not JSON"), (b"[1,2]", "holds a JSON array, not an object"),
    (b'{"add": 5}', "maps 'add' to 5, not a file name"), (b'\xef\xbb\xbf{"add": "a.py"}', "is not JSON"),
    (b'{"add": "caf\xe9.py"}', "is not UTF-8 text"),
])
def test_a_broken_function_map_is_refused_up_front_naming_the_folder_and_file(tmp_path, functions_dir, capsys,
                                                                              map_bytes, says):
    """Only the map is read, in this process (never the functions' code): a map the sandbox cannot read is one
    error about the folder before any row, not every row reported as failing (or as unknown_function)."""
    folder = tmp_path / "fx"
    folder.mkdir()
    (folder / "basic_functions.py").write_bytes((shared_data(*FUNCTIONS) / "basic_functions.py").read_bytes())
    (folder / "func_file_map.json").write_bytes(map_bytes)
    with pytest.raises(DataNotFoundError, match=says) as info:
        executable_functions(folder)
    assert str(folder) in str(info.value) and "func_file_map.json" in str(info.value)
    code = cli.main(["verify", "nestful", "--sample", "--executable-functions", str(folder)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "func_file_map.json" in err and "Traceback" not in err
    report = SkipReport(keep_all=True)
    with pytest.raises(DataNotFoundError, match="func_file_map.json"):
        list(td.load("nestful", data_files=td.sample_files("nestful"), split="train", execute=True, streaming=True,
                     executable_functions=str(folder), on_error="skip", report=report))
    assert report.skipped == 0  # no data row is blamed
    assert not any("py_code_file" in name or name == "basic_functions.py" for name in sys.modules)


def test_basic_functions_that_are_not_utf8_text_are_refused_up_front_without_being_run(tmp_path, functions_dir):
    """The sandbox child reads basic_functions.py as UTF-8 source: one that is not failed every row, one line
    each. It is read here as bytes only."""
    folder = tmp_path / "fx"
    folder.mkdir()
    (folder / "func_file_map.json").write_bytes((shared_data(*FUNCTIONS) / "func_file_map.json").read_bytes())
    (folder / "basic_functions.py").write_bytes(b"def add(a, b):\n    return a + b  # caf\xe9\n")
    with pytest.raises(DataNotFoundError, match=r"basic_functions.py is not UTF-8 text \(byte 0xe9"):
        executable_functions(folder)
    assert not any(name == "basic_functions.py" or name == "basic_functions" for name in sys.modules)


def test_a_sandbox_that_fails_before_its_first_sample_says_so_in_one_line(tmp_path):
    """run_sequences is given a folder nobody checked: the child cannot read the map, and its traceback is
    folded into the one-line error."""
    (tmp_path / "basic_functions.py").write_text("def add(a, b):\n    return a + b\n")
    (tmp_path / "func_file_map.json").write_text("notjson{")
    with pytest.raises(SandboxError, match="JSONDecodeError") as info:
        run_sequences([one_call("add", 1, 2)], tmp_path, FAST)
    assert "\n" not in str(info.value)


def test_upstream_modules_never_enter_this_process(real_results):
    assert not any("py_code_file" in name or name == "basic_functions.py" for name in sys.modules)
    assert not any(m and "executable_functions" in (getattr(m, "__file__", "") or "") for m in sys.modules.values())


# --------------------------------------------------------------------------------------------------
# Executed rows
# --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def executed(real_rows, real_results):
    results, _ = real_results
    out = []
    for row, result in zip(real_rows, results):
        try:
            out.append((row, executed_row(row, result)))
        except ExecutionError as error:
            out.append((row, error))
    return out


def test_executed_rows_are_complete_trajectories_one_call_per_turn(executed):
    for row, done in executed:
        if isinstance(done, ExecutionError):
            assert row["meta"]["sample_id"] == NETWORK_ROW
            assert done.field == "output[0]" and str(done.message).startswith("network:")
            continue
        validate_unified(done)
        calls = gold_calls(row)
        roles = [m["role"] for m in done["messages"]]
        assert roles == ["user"] + ["assistant", "tool"] * len(calls) + ["assistant"]
        for k, call in enumerate(calls):
            turn, result = done["messages"][1 + 2 * k], done["messages"][2 + 2 * k]
            assert [c["id"] for c in turn["tool_calls"]] == [call["label"]]
            assert turn["tool_calls"][0]["function"]["arguments"] == call["arguments"]  # references verbatim
            assert (result["tool_call_id"], result["name"]) == (call["label"], call["name"])
        assert json.loads(done["messages"][-1]["content"]) == row["meta"]["gold_answer"]
        assert done["meta"]["execution"]["reproduces_gold"] is True
        assert done["call_graph"] == row["call_graph"] and done["tools"] == row["tools"]
        assert NestfulSource().from_unified(done) == NestfulSource().from_unified(row)  # raw is unchanged
    assert sum(isinstance(d, ExecutionError) for _, d in executed) == 1


def test_tool_contents_are_json_text_of_the_results(executed):
    by_id = {row["meta"]["sample_id"]: done for row, done in executed}
    math_row = by_id["3a4b7b77-f0a1-4537-8623-432023f545bb"]
    assert [m["content"] for m in math_row["messages"] if m["role"] == "tool"] == ["0.25", "20.0", "40.0"]
    assert math_row["messages"][-1]["content"] == "40.0"
    strings = [d for _, d in executed if isinstance(d, dict) and isinstance(d["meta"]["gold_answer"], str)]
    assert strings and all(d["messages"][-1]["content"].startswith('"') for d in strings)


def test_executed_rows_render_through_a_tool_chat_template(executed):
    row = next(d for _, d in executed if isinstance(d, dict) and len(gold_calls(d)) >= 3)
    text = render(row["messages"], row["tools"])
    assert text.count('<tool_call>\n{"name": "') == len(gold_calls(row))
    assert text.count("<tool_response>") == len(gold_calls(row))
    first_call = text.index('"$var')  # a later call reads an earlier result, rendered before it
    assert text.index("<tool_response>") < first_call
    assert text.rstrip().endswith(row["messages"][-1]["content"] + "<|im_end|>")


def test_executed_rows_round_trip_through_toolmind_and_swift(executed):
    toolmind, swift = ToolMindSource(), MsSwiftSource()
    written = 0
    for _, row in executed:
        if not isinstance(row, dict):
            continue
        tm = write_toolmind_row(row)
        back = toolmind.to_unified(toolmind.to_raw(tm, RowContext("toolmind", "x.parquet", 0, "")),
                                   RowContext("toolmind", "x.parquet", 0, ""))
        sw = output_format("swift").write(row)
        sw_ctx = RowContext("ms_swift", "nestful.jsonl", 0, "train")
        back_swift = swift.to_unified(swift.to_raw(sw, sw_ctx), sw_ctx)
        for reread in (back, back_swift):
            assert [m["role"] for m in reread["messages"] if m["role"] != "system"] == \
                [m["role"] for m in row["messages"]]
            assert [m["content"] for m in reread["messages"] if m["role"] in ("user", "tool")] == \
                [m["content"] for m in row["messages"] if m["role"] in ("user", "tool")]
            assert [(c["function"]["name"], c["function"]["arguments"]) for m in reread["messages"]
                    for c in m.get("tool_calls", [])] == [(c["name"], c["arguments"]) for c in gold_calls(row)]
            assert reread["messages"][-1]["content"] == row["messages"][-1]["content"]
        written += 1
    assert written == 70


def test_all_calls_in_one_turn_is_the_other_layout(real_rows, real_results):
    results, _ = real_results
    row, result = real_rows[0], results[0]
    done = executed_row(row, result, calls_per_turn="all")
    n = len(gold_calls(row))
    assert [m["role"] for m in done["messages"]] == ["user", "assistant"] + ["tool"] * n + ["assistant"]
    validate_unified(done)
    assert output_format("swift").write(done)["messages"][-1]["content"] == done["messages"][-1]["content"]


def test_rows_without_gold_or_whose_answer_differs_are_reported(real_rows, real_results):
    results, _ = real_results
    row = real_rows[0]
    no_gold = dict(row, meta=dict(row["meta"], gold_answer=None))
    with pytest.raises(ExecutionError, match="no_gold"):
        execution_job(no_gold)
    wrong = SequenceResult(**{**results[0].__dict__, "win_upstream": False})
    assert executed_row(row, wrong)["meta"]["execution"]["reproduces_gold"] is False
    with pytest.raises(ExecutionError, match="gold_mismatch"):
        executed_row(row, wrong, require_reproduced=True)


def test_execute_rows_reports_each_row_and_drops_none(real_rows, functions_dir):
    by_id = {r["meta"]["sample_id"]: r for r in real_rows}
    rows = [by_id[NETWORK_ROW], by_id["3a4b7b77-f0a1-4537-8623-432023f545bb"]]
    rows.append(dict(rows[1], meta=dict(rows[1]["meta"], gold_answer=None)))
    network, done, no_gold = execute_rows(rows, functions_dir=functions_dir)
    assert isinstance(network, ExecutionError) and network.message.startswith("network:")
    assert done["messages"][-1]["content"] == "40.0"
    assert isinstance(no_gold, ExecutionError) and no_gold.message.startswith("no_gold:")


def test_an_earlier_result_too_long_to_keep_does_not_fail_a_sequence_that_gives_its_answer(real_rows, functions_dir):
    """generate_even_numbers_list() -> sum_or_average(...) = 2550: with max_result_chars under the list's
    length, the list is left out of the results and said in a note, but the sequence ran and gives the gold
    answer: it wins in both checks and its status is ok (it was "error: result_too_large" beside a win, and
    verify failed the gold). An executed row, which needs every result for its tool messages, refuses it."""
    row = next(r for r in real_rows if r["meta"]["sample_id"] == "e5907658-0492-404a-94c6-c1f705d9aeb9")
    limits = SandboxLimits(max_result_chars=20)
    (result,) = run_sequences([execution_job(row)], functions_dir, limits)
    assert (result.status, result.reason, result.answer["value"]) == ("ok", None, 2550)
    assert result.win_upstream and result.win_corrected and "omitted" in result.results[0]
    assert any("call 0" in n and "left out" in n for n in result.notes)
    assert verify_rows([row], functions_dir=functions_dir, limits=limits).reproduced == 1
    with pytest.raises(ExecutionError, match=r"result_too_large") as raised:
        executed_row(row, result)
    assert raised.value.field == "output[0]"
    # The final answer itself too long to report stays a failure
    (answer_too_long,) = run_sequences([execution_job(row)], functions_dir, SandboxLimits(max_result_chars=3))
    assert (answer_too_long.status, answer_too_long.reason, answer_too_long.win_corrected) == (
        "error", "result_too_large", False)


# --------------------------------------------------------------------------------------------------
# The functions folder: local, or the pinned archive through datasets' download manager
# --------------------------------------------------------------------------------------------------


ARCHIVED = ["basic_functions.py", "func_file_map.json"] + [f"py_code_file_{i}.py" for i in range(1, 6)]


def pinned_archive(tmp_path, functions_dir) -> str:
    """A tar.gz laid out as GitHub's archive of the pinned commit, made from (part of) the local copy."""
    path = tmp_path / "NESTFUL.tar.gz"
    top = f"NESTFUL-{UPSTREAM.revision}"
    with tarfile.open(path, "w:gz") as tar:
        tar.add(str(shared_data("nestful", "data_v1", "executable", "executable-spec.json")),
                arcname=f"{top}/data_v1/executable/executable-spec.json")  # the rest of the repository
        for name in ARCHIVED:
            tar.add(os.path.join(functions_dir, name), arcname=f"{top}/{FUNCTIONS_PATH}/{name}")
    return str(path)


def test_pinned_functions_download_extracts_once_and_checks_the_map(tmp_path, cache_dir, functions_dir, monkeypatch):
    assert archive_url() == f"https://github.com/IBM/NESTFUL/archive/{UPSTREAM.revision}.tar.gz"
    archive = pinned_archive(tmp_path, functions_dir)
    folder = executable_functions(archive=archive, cache_dir=cache_dir)
    assert folder.parts[-2:] == ("data_v2", "executable_functions") and sorted(os.listdir(folder)) == sorted(ARCHIVED)
    # The second call is served from the cache: nothing is extracted again.
    monkeypatch.setattr(datasets.utils.extract.Extractor, "extract",
                        classmethod(lambda *a, **k: pytest.fail("extracted twice")))
    assert executable_functions(archive=archive, cache_dir=cache_dir) == folder
    (result,) = run_sequences([one_call("add", 1, 2)], folder)  # basic_functions.py of the pinned folder
    assert result.ok and result.answer["value"] == 3


def test_a_different_functions_map_is_refused_for_the_pinned_revision(tmp_path, cache_dir, evil_dir):
    path = tmp_path / "fake.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for name in os.listdir(evil_dir):
            tar.add(os.path.join(evil_dir, name), arcname=f"NESTFUL-x/{FUNCTIONS_PATH}/{name}")
    with pytest.raises(DataNotFoundError, match="not the pinned one"):
        executable_functions(archive=str(path), cache_dir=cache_dir)


def test_a_kept_download_of_the_pinned_archive_with_another_map_says_what_to_delete(tmp_path, cache_dir, evil_dir,
                                                                                    monkeypatch):
    # The copy is read again by every later load, offline too: the error said only that the map differed.
    from datasets.utils.file_utils import hash_url_to_filename

    kept = Path(cache_dir, hash_url_to_filename(archive_url()))
    kept.parent.mkdir(parents=True)
    with tarfile.open(kept, "w:gz") as tar:
        for name in os.listdir(evil_dir):
            tar.add(os.path.join(evil_dir, name), arcname=f"NESTFUL-x/{FUNCTIONS_PATH}/{name}")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DataNotFoundError, match="not the pinned one") as raised:
        executable_functions(cache_dir=cache_dir)
    message = str(raised.value)
    assert f"delete the copy an earlier load kept ({kept}) and its extraction (" in message
    assert "executable_functions='path/to/NESTFUL/data_v2/executable_functions'" in message


def test_a_downloaded_archive_serves_again_without_a_request_and_offline(tmp_path, cache_dir, functions_dir,
                                                                        monkeypatch):
    # Each load asked the host for the archive's ETag, and offline the copy downloaded before was refused.
    import functools
    import http.server
    import threading

    archive = pinned_archive(tmp_path, functions_dir)
    requests = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            requests.append(self.command)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                             functools.partial(Handler, directory=os.path.dirname(archive)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/{os.path.basename(archive)}"
    try:
        folder = executable_functions(archive=url, cache_dir=cache_dir)
        fetched = len(requests)
        assert fetched and executable_functions(archive=url, cache_dir=cache_dir) == folder
        assert len(requests) == fetched  # the copy, without asking again
    finally:
        server.shutdown()
        server.server_close()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert executable_functions(archive=url, cache_dir=cache_dir) == folder
    with pytest.raises(DataNotFoundError, match="no earlier load downloaded it"):
        executable_functions(archive=url.replace(".tar.gz", "-other.tar.gz"), cache_dir=cache_dir)


def test_offline_without_a_local_folder_is_one_clear_error(monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(DataNotFoundError, match="--executable-functions"):
        executable_functions()


@pytest.mark.parametrize("streaming", [False, True], ids=["map-style", "streaming"])
def test_loading_with_a_folder_that_is_not_the_functions_is_that_clear_error(tmp_path, cache_dir, streaming):
    """The folder is checked when the builder is made, in both modes (a stream used to find it at its first row;
    map-style, datasets wrapped it in DatasetGenerationError): load() raises the error itself."""
    with pytest.raises(DataNotFoundError, match="is not a NESTFUL executable_functions folder"):
        td.load("nestful", data_files=td.sample_files("nestful"), split="train", execute=True,
                executable_functions=str(tmp_path), streaming=streaming, cache_dir=cache_dir)


def test_a_functions_folder_that_is_no_path_is_a_type_error_naming_the_option(cache_dir):
    # (pathlib's "expected str, bytes or os.PathLike object, not int", from inside load())
    with pytest.raises(TypeError, match=r"executable_functions folder must be a path .*got int 123"):
        td.load("nestful", data_files=td.sample_files("nestful"), split="train", execute=True,
                executable_functions=123, cache_dir=cache_dir)
    with pytest.raises(TypeError, match=r"executable_functions folder must be a path .*got list"):
        executable_functions(["data_v2/executable_functions"])


# --------------------------------------------------------------------------------------------------
# verify
# --------------------------------------------------------------------------------------------------


def test_verify_counts_per_category_and_lists_the_failure(real_rows, functions_dir):
    report = verify_rows(real_rows, functions_dir=functions_dir, batch_size=40)  # two sandbox processes
    assert (report.rows, report.reproduced) == (71, 70)
    assert report.by_category == {"code": {"rows": 27, "reproduced": 26}, "math": {"rows": 44, "reproduced": 44}}
    (failure,) = report.failures
    assert failure["sample_id"] == NETWORK_ROW and failure["reason"] == "network" and failure["status"] == "refused"
    assert "network" in report.table() and NETWORK_ROW in report.table()


def test_verify_and_execute_refuse_rows_that_are_not_unified(functions_dir):
    # A raw or upstream row (its gold answer at the top, not in meta) was verified as a failure of each row,
    # 'None (other): no_gold: the row has no gold_answer', though every one of them has one
    source = NestfulSource()
    native = json.loads(shared_data(*TOY).read_text().splitlines()[0])
    for row in (native, source.to_raw(native, ctx())):
        with pytest.raises(TypeError, match="unified rows.*'output'.*no 'messages'"):
            verify_rows([row], functions_dir=functions_dir)
        with pytest.raises(TypeError, match="unified rows"):
            execute_rows([row], functions_dir=functions_dir)


def test_a_gold_mismatch_names_the_gold_answer_beside_the_answer_given(functions_dir):
    # The table said only 'gold_mismatch: the gold calls give 6400.0', not what it was checked against
    source = NestfulSource()
    native = dict(json.loads(shared_data(*TOY).read_text().splitlines()[0]), gold_answer=1.5)
    report = verify_rows([source.to_unified(source.to_raw(native, ctx()), ctx())], functions_dir=functions_dir)
    (failure,) = report.failures
    assert failure["reason"] == "gold_mismatch"
    assert failure["detail"] == f"the gold calls give {failure['answer']}, not the gold answer 1.5"
    assert "not the gold answer 1.5" in report.table()


def numpy_answer_row() -> dict:
    """A unified row whose gold calls run upstream's convert_matrix_to_vector, which returns a numpy array:
    ``array == list`` is ambiguous, so the official check crashes and the package counts no win, with a note."""
    source = NestfulSource()
    return source.to_unified(source.to_raw(numpy_answer_native(), ctx()), ctx())


def numpy_answer_native() -> dict:
    tool = {"name": "convert_matrix_to_vector", "description": "Converts a matrix to a vector.",
            "parameters": {"A": {"type": "array", "description": "The input matrix."},
                           "column": {"type": "boolean", "description": "Concatenate columns."}},
            "output_parameters": {"output_0": {"type": "array", "description": "The vector."}}}
    native = {"sample_id": "numpy-answer", "input": "Flatten [[1, 2], [3, 4]].",
              "output": [{"name": "convert_matrix_to_vector", "arguments": {"A": [[1, 2], [3, 4]], "column": True},
                          "label": "$var1"}], "tools": [tool], "gold_answer": [1, 2, 3, 4]}
    return native


def test_verify_says_why_an_answer_equal_to_the_gold_does_not_reproduce(functions_dir):
    # verify dropped the note and printed "gold_mismatch: the gold calls give [1,2,3,4]" for a gold answer of
    # [1, 2, 3, 4]: a report that contradicts itself
    report = verify_rows([numpy_answer_row()], functions_dir=functions_dir)
    (failure,) = report.failures
    assert (failure["reason"], failure["answer"]) == ("gold_mismatch", [1, 2, 3, 4])
    assert "the gold calls give [1,2,3,4]" in failure["detail"]
    assert "upstream's scorer crashes comparing the answer" in failure["detail"] and "ambiguous" in failure["detail"]
    assert "ambiguous" in report.table()


def test_verify_json_says_what_a_failing_answer_is_in_python(functions_dir, tmp_path, capsys):
    # --json gave the answer as JSON alone: upstream's numpy array read as the list [1, 2, 3, 4], the gold itself,
    # with nothing saying it is something else
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps(numpy_answer_native()) + "\n")
    code = cli.main(["verify", "nestful", "--data-files", str(path), "--executable-functions", functions_dir, "--json"])
    (failure,) = json.loads(capsys.readouterr().out)["failures"]
    assert code == 1 and failure["reason"] == "gold_mismatch"
    assert (failure["answer"], failure["answer_type"], failure["answer_repr"]) == (
        [1, 2, 3, 4], "numpy.ndarray", "array([1, 2, 3, 4])")
    assert "the gold calls give [1,2,3,4] (Python numpy.ndarray: array([1, 2, 3, 4]))" in failure["detail"]


def test_every_function_takes_the_functions_folder_by_loads_name(real_rows, functions_dir, evil_dir):
    """load's option and the commands' --executable-functions name it executable_functions; score took it only as
    executable_functions_dir and verify, verify_rows and execute_rows as functions_dir (TypeError: unexpected
    keyword argument). Both names at once could name two folders: refused."""
    row = next(r for r in real_rows if r["meta"]["sample_id"] == "3a4b7b77-f0a1-4537-8623-432023f545bb")
    assert verify_rows([row], executable_functions=functions_dir).reproduced == 1
    (done,) = execute_rows([row], executable_functions=functions_dir)
    assert done["messages"][-1]["content"] == "40.0"
    calls = [{"name": "returns_text", "label": "$var_1", "arguments": {"x": "nan"}}]
    tools = [{"name": "returns_text", "description": "", "parameters": {"x": {"type": "string"}},
              "output_parameters": {"result": {"type": "string"}}}]
    items = [ScoreItem("text", calls, tools, '"nan"', calls)]
    assert score(items, parser="calls", executable_functions=evil_dir, limits=FAST).win_rate == 1.0
    for call in (lambda: verify_rows([row], executable_functions=functions_dir, functions_dir=functions_dir),
                 lambda: execute_rows([row], executable_functions=functions_dir, functions_dir=functions_dir),
                 lambda: score(items, executable_functions=evil_dir, executable_functions_dir=evil_dir)):
        with pytest.raises(TypeError, match="given twice, as executable_functions= and"):
            call()


def test_verify_refuses_both_folder_names_before_reading_the_data_files(tmp_path, evil_dir):
    # The data files were looked for first: a missing one was a DataNotFoundError, not the call's own mistake
    with pytest.raises(TypeError, match="given twice, as executable_functions= and functions_dir="):
        verify(str(tmp_path / "missing.jsonl"), executable_functions=evil_dir, functions_dir=evil_dir)


def test_score_samples_say_what_each_answer_is_in_python(evil_dir):
    """An answer JSON cannot hold is written as its repr, and a tuple as a list: in score's samples the float NaN
    and the string "nan" were both the answer "nan", and a tuple the list it reads as. Each answer now has its
    Python type and repr beside its JSON value."""
    tools = [{"name": n, "description": "", "parameters": {"x": {"type": "string"}},
              "output_parameters": {"result": {"type": "string"}}}
             for n in ("returns_nan", "returns_text", "returns_tuple", "returns_odd")]
    items = [ScoreItem(f"{name}-{arg}", [{"name": name, "label": "$var_1", "arguments": {"x": arg}}], tools, '"nan"',
                       [{"name": name, "label": "$var_1", "arguments": {"x": arg}}])
             for name, arg in (("returns_nan", 0), ("returns_text", "nan"), ("returns_tuple", 2), ("returns_odd", 3))]
    scores = score(items, parser="calls", executable_functions_dir=evil_dir, limits=FAST)
    samples = json.loads(json.dumps(scores.to_dict(samples=True)))["samples"]
    got = [(s["execution"]["answer"], s["execution"]["answer_type"], s["execution"]["answer_repr"]) for s in samples]
    assert got == [("nan", "float", "nan"), ("nan", "str", "'nan'"), ([2, 2], "tuple", "(2, 2)"),
                   (["odd \\ud83d", "{3: 1}"], "list", "[odd \\ud83d, {3: 1}]")]
    assert [s["win"] for s in samples] == [False, True, False, False]
    assert scores.samples[0].execution.answer_text() == '"nan" (Python float: nan)'
    assert scores.samples[1].execution.answer_text() == '"nan"'


def test_verify_says_why_a_gold_float_with_an_exponent_is_not_reproduced(functions_dir):
    """Upstream's check rounds a float answer to the characters after the '.' of str(gold), exponent included:
    for a gold of 6.4e-05 that is 5, and the exact answer rounds to 6e-05. verify printed "gold_mismatch: the
    gold calls give 0.000064" for the gold answer 6.4e-05, a report that contradicts itself."""
    native = json.loads(shared_data(*CURRENT).read_text().splitlines()[0])  # 3a4b7b77 (math), one call changed
    native["output"] = [{"name": "divide", "label": "$var_1", "arguments": {"arg_0": 64, "arg_1": 1000000}}]
    native["gold_answer"] = 6.4e-05
    source = NestfulSource()
    report = verify_rows([source.to_unified(source.to_raw(native, ctx()), ctx())], functions_dir=functions_dir)
    (failure,) = report.failures
    assert (failure["reason"], failure["answer"], failure["gold_answer"]) == ("gold_mismatch", 6.4e-05, 6.4e-05)
    assert ("upstream's check rounds the answer to the 5 characters after the '.' of 6.4e-05 (exponent included), "
            "which makes 6.4e-05 6e-05: no win (the corrected check counts it)") in failure["detail"]


def test_a_gold_mismatch_error_of_an_executed_row_says_why_the_answer_does_not_count(functions_dir):
    # It read "the gold calls give [1,2,3,4], not the gold answer [1,2,3,4]", without the reason
    row = numpy_answer_row()
    (result,) = run_sequences([execution_job(row)], functions_dir)
    with pytest.raises(ExecutionError) as info:
        executed_row(row, result, require_reproduced=True)
    assert info.value.message.startswith("gold_mismatch: the gold calls give [1,2,3,4] (Python numpy.ndarray: "
                                         "array([1, 2, 3, 4])), not the gold answer [1,2,3,4]")
    assert "upstream's scorer crashes comparing the answer" in info.value.message and "ambiguous" in info.value.message


def test_verify_names_the_reason_of_a_row_without_gold_answer_once(real_rows, functions_dir):
    # It used to read "no_gold: no_gold: the row has no gold_answer to reproduce", and the failure lacked the
    # keys every other failure has (failed_call, answer, upstream_counts_as_win)
    row = next(r for r in real_rows if r["subset"] == "math")
    row = dict(row, meta=dict(row["meta"], gold_answer=None))
    report = verify_rows([row], functions_dir=functions_dir)
    (failure,) = report.failures
    assert (failure["status"], failure["reason"], failure["detail"]) == (
        "error", "no_gold", "the row has no gold_answer to reproduce")
    assert failure["failed_call"] is None and failure["answer"] is None and failure["upstream_counts_as_win"] is False
    assert f"{row['meta']['sample_id']} (math): no_gold: the row has no gold_answer to reproduce" in report.table()
    assert "no_gold: no_gold" not in report.table()


def test_verify_names_a_v1_row_by_its_id(functions_dir):
    """v1 rows have no gold answer and a null sample_id: each failure names the row by its unified id (it was
    None, so the table listed rows nobody could find)."""
    folder = shared_data("nestful", "data_v1", "executable")
    files = [str(folder / name) for name in ("executable-data.json", "executable-spec.json")]
    rows = list(td.load("nestful", data_files={"train": files}, data_version="v1", split="train",
                        streaming=True).take(2))
    report = verify_rows(rows, functions_dir=functions_dir)
    assert [f["sample_id"] for f in report.failures] == [r["id"] for r in rows]
    assert [f["reason"] for f in report.failures] == ["no_gold", "no_gold"]
    assert f"{rows[0]['id']} (" in report.table()


def test_verify_command_json(functions_dir, capsys):
    files = [str(shared_data(*TOY)), str(shared_data(*CURRENT))]
    code = cli.main(["verify", "nestful", "--data-files", *files, "--executable-functions", functions_dir, "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1  # one row does not reproduce
    assert (out["rows"], out["reproduced"]) == (66, 65)
    assert out["by_category"] == {"code": {"rows": 25, "reproduced": 24}, "math": {"rows": 41, "reproduced": 41}}
    assert [f["sample_id"] for f in out["failures"]] == [NETWORK_ROW]
    assert all(out[kind] for kind in ("network", "filesystem", "processes"))  # what the sandbox achieved, or why not


def test_verify_command_reads_every_data_files_flag(functions_dir, capsys):
    # argparse kept the last --data-files list silently: the toy file below was not verified at all
    code = cli.main(["verify", "nestful", "--data-files", str(shared_data(*TOY)), "--data-files",
                     str(shared_data(*CURRENT)), "--executable-functions", functions_dir, "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1 and (out["rows"], out["reproduced"]) == (66, 65)


@pytest.mark.parametrize("text", ["", "\n\n", "[]"])
def test_verify_command_fails_when_there_is_nothing_to_verify(text, functions_dir, tmp_path, capsys):
    # An empty file (a glob that matched the wrong file, an export that wrote nothing) used to pass: exit 0
    path = tmp_path / ("rows.json" if text == "[]" else "rows.jsonl")
    path.write_text(text)
    for extra in ([], ["--json"]):
        code = cli.main(["verify", "nestful", "--data-files", str(path), "--executable-functions", functions_dir,
                         *extra])
        assert code == 1
        assert "no rows: nothing was verified" in capsys.readouterr().err


@pytest.mark.parametrize("as_json", [False, True])
def test_verify_command_fails_when_rows_were_skipped(as_json, functions_dir, tmp_path, capsys):
    # With --on-error skip, a row that cannot be read is not verified: the run used to exit 0 ("all reproduce")
    lines = [line for line in shared_data(*CURRENT).read_text().splitlines() if line.strip()]
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join([*lines, lines[0][:80]]) + "\n")
    args = ["verify", "nestful", "--data-files", str(path), "--executable-functions", functions_dir,
            "--on-error", "skip"]
    code = cli.main(args + (["--json"] if as_json else []))
    out = capsys.readouterr().out
    assert code == 1
    if as_json:
        data = json.loads(out)
        assert (data["rows"], data["reproduced"], data["skipped"], data["unreadable_rows"]["skipped"]) == (2, 2, 1, 1)
    else:
        assert ["total", "2", "2"] in [line.split() for line in out.splitlines()]
        assert "3 rows read, 1 skipped" in out and f"{path} row 2 field '<line>'" in out
        assert "1 unreadable row not verified (skipped)" in out
    # In Python too: the result says that a row was not verified, whether a report was passed or not
    from tooluse_datasets.builders.nestful.verify import verify

    assert verify(str(path), functions_dir=functions_dir, on_error="skip").skipped == 1
    path.write_text("\n".join(lines) + "\n")  # nothing skipped: every row reproduces
    assert cli.main(args) == 0


def test_verify_passes_on_the_bundled_sample(functions_dir, capsys):
    """The README's first verify is the bundled sample: every row of it calls upstream's functions with the
    arguments they take and its gold answer is what they give (its code rows used to call functions upstream
    does not have, and its sqrt row passed a float to upstream's math.isqrt: 3 of 5 failed, exit 1)."""
    code = cli.main(["verify", "nestful", "--sample", "--executable-functions", functions_dir, "--json"])
    out = json.loads(capsys.readouterr().out)
    assert (code, out["rows"], out["reproduced"], out["failures"]) == (0, 5, 5, [])
    assert out["by_category"] == {"code": {"rows": 2, "reproduced": 2}, "math": {"rows": 3, "reproduced": 3}}
    assert cli.main(["verify", "nestful", "--sample", "--executable-functions", functions_dir]) == 0
    assert capsys.readouterr().out.splitlines()[3].split() == ["total", "5", "5"]


# --------------------------------------------------------------------------------------------------
# Through the builder: load("nestful", execute=True, executable_functions=DIR)
# --------------------------------------------------------------------------------------------------


def test_load_with_execute_gives_executed_rows_and_counts_the_failure(functions_dir, cache_dir):
    files = [str(shared_data(*TOY)), str(shared_data(*CURRENT))]
    report = SkipReport()
    options = dict(data_files=files, split="train", execute=True, executable_functions=functions_dir, on_error="skip")
    mapped = td.load("nestful", cache_dir=cache_dir, report=report, **options)
    streamed = list(td.load("nestful", streaming=True, **options))
    assert len(mapped) == 65 and list(mapped) == streamed
    assert (report.rows_read, report.skipped, dict(report.by_reason)) == (66, 1, {"ExecutionError:network": 1})
    plain = {r["meta"]["sample_id"]: r for r in td.load("nestful", data_files=files, split="train", cache_dir=cache_dir)}
    for row in streamed:
        assert row["meta"]["execution"]["reproduces_gold"] is True
        assert [c for m in row["messages"] for c in m.get("tool_calls", [])] == \
            plain[row["meta"]["sample_id"]]["messages"][1]["tool_calls"]
    with pytest.raises(ExecutionError, match="network"):
        td.load("nestful", data_files=files, split="train", execute=True, executable_functions=functions_dir,
                cache_dir=cache_dir + "-raise")


def failing_executions(tmp_path):
    """Real rows whose execution fails for three reasons, at different calls: the toy row that needs the network
    (output[0]), a real math row (which reproduces) and copies of it broken in three ways: a division by zero at
    output[0], a list times a float at output[1], a gold answer its calls do not give. Returns the file and, per
    sample_id, its row number and the (reason, field) its skip must have."""
    network = next(line for line in shared_data(*TOY).read_text().splitlines() if NETWORK_ROW in line)
    math_row = json.loads(shared_data(*CURRENT).read_text().splitlines()[0])
    rows = [json.loads(network), math_row]
    for suffix, change in (("zero", lambda r: r["output"][0]["arguments"].update(arg_1=0)),
                           ("list", lambda r: r["output"][1]["arguments"].update(arg_1=[1])),
                           ("gold", lambda r: r.update(gold_answer=r["gold_answer"] + 1))):
        broken = json.loads(json.dumps(math_row))
        broken["sample_id"] += f"-{suffix}"
        change(broken)
        rows.append(broken)
    path = tmp_path / "executions.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    expected = {NETWORK_ROW: ("network", "output[0]"), f"{math_row['sample_id']}-zero": ("exception", "output[0]"),
                f"{math_row['sample_id']}-list": ("exception", "output[1]"),
                f"{math_row['sample_id']}-gold": ("gold_mismatch", "gold_answer")}
    return path, {r["sample_id"]: (i, *expected[r["sample_id"]]) for i, r in enumerate(rows) if r["sample_id"] in expected}


@pytest.mark.parametrize("streaming", [False, True])
def test_a_failed_execution_is_reported_with_its_row_id_and_counted_by_reason(streaming, functions_dir, cache_dir,
                                                                              tmp_path, caplog):
    """An execution skip used to carry no row id (row_id None in the skipped rows) and was counted by the call
    that failed (ExecutionError:output[0], ExecutionError:output[1]...): two rows failing for the same reason
    were two reasons, and one row could not be found by its id. Now each names its unified id, file and row, and
    is counted under its error type and why it failed, as a validation skip is counted by rule."""
    path, expected = failing_executions(tmp_path)
    options = dict(data_files=str(path), split="train", execute=True, executable_functions=functions_dir,
                   require_reproduced=True, on_error="skip", streaming=streaming)
    if not streaming:
        options["cache_dir"] = cache_dir
    report = SkipReport(keep_all=True)
    rows = list(td.load("nestful", report=report, **options))
    assert [r["meta"]["sample_id"] for r in rows] == [json.loads(shared_data(*CURRENT).read_text().splitlines()[0])
                                                      ["sample_id"]]
    assert (report.rows_read, report.skipped) == (5, 4)
    assert dict(report.by_reason) == {"ExecutionError:network": 1, "ExecutionError:exception": 2,
                                      "ExecutionError:gold_mismatch": 1}
    by_id = {r["row_id"]: r for r in report.rows}
    assert sorted(by_id) == sorted(f"nestful/{'code' if i == NETWORK_ROW else 'math'}/{i}" for i in expected)
    for row_id, record in by_id.items():
        row, cause, field = expected[row_id.rsplit("/", 1)[1]]
        assert (record["file"], record["row"], record["field"]) == (str(path), row, field)
        assert (record["error"], record["reason"]) == ("ExecutionError", f"ExecutionError:{cause}")
        assert record["message"].startswith(f"{cause}: ")
    assert sorted(e.row_id for e in report.examples) == sorted(by_id)
    # The log line names the row by its id too
    assert f"row id 'nestful/code/{NETWORK_ROW}', {path}, row 0, field 'output[0]': network:" in caplog.text
    if not streaming:  # a second load from the cache reports the same rows
        again = SkipReport(keep_all=True)
        td.load("nestful", report=again, **options)
        assert (again.skipped, dict(again.by_reason)) == (report.skipped, dict(report.by_reason))
        assert sorted(r["row_id"] for r in again.rows) == sorted(by_id)
    # Raised, the error names the row's id and keeps it across processes (num_proc, DataLoader workers)
    with pytest.raises(ExecutionError) as raised:
        list(td.load("nestful", **dict(options, on_error="raise", cache_dir=cache_dir + "-raise")))
    assert raised.value.row_id == f"nestful/code/{NETWORK_ROW}"
    assert str(raised.value).startswith(f"row id 'nestful/code/{NETWORK_ROW}', {path}, row 0, field 'output[0]'")
    copied = pickle.loads(pickle.dumps(raised.value))
    assert (type(copied), str(copied), copied.reason) == (ExecutionError, str(raised.value), "ExecutionError:network")


def test_a_sandbox_failing_for_a_whole_batch_names_each_row_by_its_id(monkeypatch, functions_dir, tmp_path):
    """A sandbox that cannot run (here: its interpreter cannot be started) fails each row of its batch, each
    named by its own id, file and row and counted under one reason."""
    from tooluse_datasets.builders.nestful.execution import sandbox

    path, _ = failing_executions(tmp_path)
    monkeypatch.setattr(sandbox.sys, "executable", str(tmp_path / "no-such-python"))
    report = SkipReport(keep_all=True)
    rows = list(td.load("nestful", data_files=str(path), split="train", streaming=True, execute=True,
                        executable_functions=functions_dir, on_error="skip", report=report))
    assert rows == [] and report.skipped == 5 and dict(report.by_reason) == {"SandboxError:sandbox": 5}
    ids = [json.loads(line)["sample_id"] for line in path.read_text().splitlines()]
    assert [(r["row"], r["row_id"].rsplit("/", 1)[1]) for r in report.rows] == list(enumerate(ids))


def test_load_with_execute_exports_toolmind_and_swift_trajectories(functions_dir, cache_dir):
    files = [str(shared_data(*CURRENT))]
    options = dict(data_files=files, split="train", execute=True, executable_functions=functions_dir, streaming=True)
    toolmind_rows = list(td.load("nestful", "toolmind", **options))
    swift_rows = list(td.load("nestful", "swift", **options))
    assert len(toolmind_rows) == len(swift_rows) == 2
    roles = [m["role"] for m in json.loads(toolmind_rows[0]["messages"])]
    assert roles[-1] == "answer" and roles.count("tool_output") == roles.count("tool_call") == 3
    assert [m["role"] for m in swift_rows[0]["messages"]][-1] == "assistant"
    with pytest.raises(ValueError, match="not 'raw'"):  # raw rows cannot hold the results: refused, not ignored
        td.load("nestful", "raw", **options)


def test_a_sandbox_that_cannot_start_is_a_typed_error_for_each_row(monkeypatch, cache_dir):
    """The sandbox failing for a whole batch (its interpreter cannot start...): every row of the batch is
    refused with its own row number (skip: counted; raise: the typed error, one line in the CLI), never a raw
    RuntimeError. A wrong functions folder is refused before, as missing data."""
    from tooluse_datasets.builders.nestful import executed

    def broken(rows, options):
        raise SandboxError("the sandbox interpreter could not start")

    monkeypatch.setattr(executed, "execute_with_options", broken)
    files = td.sample_files("nestful")
    report = td.SkipReport(keep_all=True)
    rows = list(td.load("nestful", data_files=files, split="train", streaming=True, execute=True,
                        on_error="skip", report=report))
    assert rows == [] and report.skipped == report.rows_read == 5
    assert {r["error"] for r in report.rows} == {"SandboxError"}
    assert len({(r["file"], r["row"]) for r in report.rows}) == 5  # each error names its own row
    with pytest.raises(td.ToolUseDataError, match="sandbox: the sandbox interpreter could not start"):
        list(td.load("nestful", data_files=files, split="train", streaming=True, execute=True))


def test_a_sample_writes_in_its_own_folder_only(evil_dir):
    """HOME and TMPDIR are the sample's own folder; the batch's folder (where the parent's logs are) and the
    next sample's folder are outside it."""
    import re

    results = run_sequences([one_call("write_in_home", "h.txt"), one_call("write_beside", "../child-0.log"),
                             one_call("write_beside", "3/planted.txt"), one_call("read_beside", "3/planted.txt")],
                            evil_dir, FAST)
    assert [(r.status, r.reason) for r in results] == [("ok", None), ("refused", "write_outside_workdir"),
                                                       ("refused", "write_outside_workdir"), ("ok", None)]
    assert re.search(r"/work/0$", results[0].answer["value"])  # HOME is the sample's folder
    assert results[3].answer["value"] is False  # nothing was planted for the next sample


def test_an_edited_functions_folder_is_run_again_not_served_from_the_cache(functions_dir, tmp_path, cache_dir):
    """Executed rows hold what a local executable_functions folder returned: the folder's files are part of
    the cache key, so an edited function (or another checkout at the same path) runs again."""
    import shutil

    folder = tmp_path / "executable_functions"
    shutil.copytree(functions_dir, folder)

    def results():
        ds = td.load("nestful", data_files=td.sample_files("nestful"), split="train", execute=True,
                     executable_functions=str(folder), on_error="skip", cache_dir=cache_dir)
        # (the math rows: they call basic functions only, the code rows call functions of other files)
        return [[m["content"] for m in row["messages"] if m["role"] == "tool"] for row in ds if row["subset"] == "math"]

    before = results()
    assert before and all(content != "42" for row in before for content in row)
    with open(folder / "basic_functions.py", "a") as f:  # every basic function now returns 42
        f.write("\n\nfor _name, _f in list(globals().items()):\n"
                "    if callable(_f) and not _name.startswith('_') and getattr(_f, '__module__', None) == __name__:\n"
                "        globals()[_name] = lambda *a, **k: 42\n")
    after = results()
    assert after and all(content == "42" for row in after for content in row)
    assert results() == after  # unchanged since: served from the cache



def test_a_library_installed_after_a_prepare_runs_the_functions_again(functions_dir, tmp_path, cache_dir,
                                                                      monkeypatch):
    """What the functions return depends on the libraries they import: a prepare made before the library was
    installed (every call of a function importing it an ImportError) was served after `pip install`, the rows
    dropped for ever. Where each imported library would be loaded from is part of the cache key."""
    import importlib
    import shutil

    folder = tmp_path / "executable_functions"
    shutil.copytree(functions_dir, folder)
    with open(folder / "basic_functions.py", "a") as f:  # add() now needs a library that is not installed yet
        f.write("\n\ndef add(arg_0, arg_1):\n    import tooluse_probe_library\n\n"
                "    return tooluse_probe_library.VALUE\n")
    libraries = tmp_path / "site-packages"
    libraries.mkdir()
    monkeypatch.syspath_prepend(str(libraries))

    def loaded():
        report = td.SkipReport()
        ds = td.load("nestful", data_files=td.sample_files("nestful"), split="train", execute=True,
                     executable_functions=str(folder), on_error="skip", cache_dir=cache_dir, report=report)
        return ds, report

    before, report = loaded()
    assert "ModuleNotFoundError" in " ".join(e.message for e in report.examples)
    assert all(m["content"] != "42" for row in before for m in row["messages"] if m["role"] == "tool")
    (libraries / "tooluse_probe_library.py").write_text("VALUE = 42\n")  # pip install
    importlib.invalidate_caches()
    after, report = loaded()
    assert "ModuleNotFoundError" not in " ".join(e.message for e in report.examples)
    assert len(after) > len(before)
    assert any(m["content"] == "42" for row in after for m in row["messages"] if m["role"] == "tool")
    assert loaded()[0].cache_files == after.cache_files  # unchanged since: served from the cache


def test_the_pinned_functions_import_the_libraries_their_cache_key_names(functions_dir):
    """On every supported Python: distutils is a library of its own from 3.12 on."""
    from tooluse_datasets.builders.nestful.execution.environment import (pinned_third_party_imports,
                                                                        third_party_imports)

    assert tuple(third_party_imports(functions_dir)) == pinned_third_party_imports()

# --------------------------------------------------------------------------------------------------
# Limits that would not limit are refused up front, naming the limit


@pytest.mark.parametrize("field, value", [("memory_mb", -5), ("memory_mb", 0), ("timeout", 0), ("timeout", -1.0),
                                          ("timeout", float("nan")), ("timeout", float("inf")), ("cpu_seconds", 0),
                                          ("disk_mb", -1), ("grace", -1.0), ("file_size_mb", 0)])
def test_sandbox_limits_that_would_not_limit_are_refused_naming_the_field(field, value):
    # memory_mb=-5 used to run every sample without any address-space limit (the negative size wraps to
    # RLIM_INFINITY); timeout=-1 or NaN failed each sample inside the sandbox with a traceback as its reason
    with pytest.raises(ValueError, match=f"SandboxLimits.{field} must be"):
        SandboxLimits(**{field: value})
    assert SandboxLimits(grace=0).grace == 0


@pytest.mark.parametrize("option, value", [("execution_timeout", -1), ("execution_timeout", 0),
                                           ("execution_timeout", float("nan")), ("execution_timeout", float("inf")),
                                           ("execution_memory_mb", -5), ("execution_memory_mb", 0)])
def test_execution_options_that_would_not_limit_are_refused_naming_the_option(option, value, functions_dir):
    # execution_timeout=-1 or 0 used to make every row an ExecutionError (all skipped with on_error="skip"),
    # NaN or infinity a DatasetGenerationError, execution_memory_mb=-5 a sandbox without a memory limit
    with pytest.raises(ValueError, match=f"option {option} must be a positive finite number"):
        td.load("nestful", data_files=str(shared_data(*ICL)), streaming=True, execute=True,
                executable_functions=functions_dir, **{option: value})


@pytest.mark.parametrize("streaming", [True, False])
def test_execute_with_the_raw_config_is_refused_naming_the_config(streaming, functions_dir, cache_dir):
    # The raw format is upstream's rows as they are: execute=True used to be ignored there without a word,
    # the rows coming back unexecuted (as validate= outside the unified config, the combination is refused)
    with pytest.raises(ValueError, match="execute= needs config='unified' or a writer format, not 'raw'"):
        td.load("nestful", "raw", split="train", streaming=streaming, data_files=str(shared_data(*ICL)),
                execute=True, executable_functions=functions_dir, cache_dir=cache_dir)
    # the other configs execute, and raw without execute loads as before
    (row,) = list(td.load("nestful", "toolmind", split="train", streaming=True, data_files=str(shared_data(*ICL)),
                          execute=True, executable_functions=functions_dir))[:1]
    assert row
    assert len(list(td.load("nestful", "raw", split="train", streaming=True, data_files=str(shared_data(*ICL))))) == 3


def test_mirror_with_execute_refuses_the_raw_config_as_export_does(functions_dir, tmp_path, capsys):
    # The mirror's builder checked the options for its default config only: the raw config was written with
    # upstream's rows unexecuted beside the executed ones, where load and export refuse execute with raw
    options = ["--option", "execute=true", "--option", f"executable_functions={functions_dir}"]
    out = tmp_path / "out"
    code = cli.main(["mirror", "nestful", "--data-files", str(shared_data(*ICL)), "--out", str(out), *options])
    assert code == 2 and not (out / "nestful").exists()
    assert "config raw" in capsys.readouterr().err
    # raw alone too, named as a config beside others is (not the bare ValueError of the builder made for it)
    assert cli.main(["mirror", "nestful", "--data-files", str(shared_data(*ICL)), "--out", str(out),
                     "--configs", "raw", *options]) == 2
    assert capsys.readouterr().err.startswith("error: nestful, config raw: execute=True gives executed trajectories")
    assert cli.main(["mirror", "nestful", "--data-files", str(shared_data(*ICL)), "--out", str(out),
                     "--configs", "unified", "swift", *options]) == 0
    assert {"swift", "unified"} <= {p.name for p in (out / "nestful").iterdir()} and not (out / "nestful" / "raw").exists()


def test_mirror_with_a_folder_that_holds_no_functions_is_refused_before_any_shard(tmp_path, capsys):
    # Each shard task used to find it: a mirror "shard failure" advising a retry that could never work, with a
    # hint about --data-files, which were fine
    (tmp_path / "functions").mkdir()
    out = tmp_path / "out"
    code = cli.main(["mirror", "nestful", "--data-files", str(shared_data(*ICL)), "--out", str(out), "--configs",
                     "unified", "--option", "execute=true", "--option", f"executable_functions={tmp_path / 'functions'}"])
    err = capsys.readouterr().err
    assert code == 2 and not out.exists()
    assert "is not a NESTFUL executable_functions folder" in err
    assert "shards failed" not in err and "--data-files" not in err


@pytest.mark.parametrize("options, named", [
    ({"require_reproduced": True}, "option require_reproduced only applies to executed rows"),
    ({"calls_per_turn": "all"}, "option calls_per_turn only applies to executed rows"),
    ({"executable_functions": "NESTFUL/data_v2/executable_functions"}, "option executable_functions only applies"),
    ({"execution_timeout": 3, "execution_memory_mb": 512}, "options execution_timeout, execution_memory_mb only apply"),
    ({"v1_tools": "used"}, "option v1_tools applies to the v1 data only")])
def test_options_that_need_another_option_are_refused_without_it(options, named):
    # They used to be ignored without a word: require_reproduced=True without execute=True gave every row,
    # checked against nothing, and v1_tools="used" with the v2 data changed nothing
    with pytest.raises(ValueError, match=named):
        td.load("nestful", split="train", streaming=True, data_files=str(shared_data(*ICL)), **options)
    with pytest.raises(ValueError, match=named):
        NestfulSource(NestfulOptions(**options))
    # the default values are no request: the defaults given explicitly load
    assert len(list(td.load("nestful", split="train", streaming=True, data_files=str(shared_data(*ICL)),
                            execution_timeout=10, calls_per_turn="one", require_reproduced=False,
                            v1_tools="catalog"))) == 3


def test_export_raw_with_execute_is_a_usage_error(functions_dir, tmp_path, capsys):
    out = tmp_path / "out"
    code = cli.main(["export", "nestful", "--data-files", str(shared_data(*ICL)), "--format", "raw", "--out",
                     str(out), "--option", "execute=true", "--option", f"executable_functions={functions_dir}"])
    assert code == 2 and not out.exists()
    assert "not 'raw'" in capsys.readouterr().err


POSITIVE = "must be a positive finite number, got"
AT_MOST = "must be at most"
WHOLE = "must be a whole number (digits only), got"


@pytest.mark.parametrize("command", ["verify", "score"])
@pytest.mark.parametrize("flag, value, message", [
    ("--timeout", "-1", POSITIVE), ("--timeout", "0", POSITIVE), ("--timeout", "nan", POSITIVE),
    ("--timeout", "inf", POSITIVE), ("--memory-mb", "-5", POSITIVE), ("--memory-mb", "0", POSITIVE),
    ("--timeout", "1e12", AT_MOST), ("--memory-mb", str(10**30), AT_MOST), ("--memory-mb", "1.5", WHOLE),
    ("--memory-mb", "1e3", WHOLE), ("--timeout", "ten", "must be a number, got")])
def test_cli_limits_the_sandbox_cannot_apply_are_usage_errors(command, flag, value, message, functions_dir,
                                                              tmp_path, capsys):
    # --memory-mb -5 ran without a memory limit; --timeout -1 reported every sample as a crash with the
    # sandbox's traceback, nan a bare ValueError, inf and 1e12 "unexpected OverflowError ... (a bug)";
    # --memory-mb 10**30 gave a sandbox that could not start; --memory-mb 1.5 and 1e3 were "not a number"
    results = tmp_path / "results.jsonl"
    results.write_text("")
    args = (["verify", "nestful", "--data-files", str(shared_data(*ICL))] if command == "verify"
            else ["score", "nestful", str(results)])
    with pytest.raises(SystemExit) as exit_info:
        cli.main([*args, "--executable-functions", functions_dir, flag, value])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}: {message}" in err and "Traceback" not in err


def test_cli_timeout_gives_at_least_its_seconds_of_cpu(functions_dir, capsys):
    # 2.4 s of wall clock used to get 2 CPU seconds (round), td.load's execution_timeout gets 3 (ceil)
    from tooluse_datasets.commands.verify import limits_from
    import argparse

    assert limits_from(argparse.Namespace(timeout=2.4, memory_mb=4096, kernel_isolation=False)).cpu_limit == 3
    assert cli.main(["verify", "nestful", "--data-files", str(shared_data(*ICL)), "--executable-functions",
                     functions_dir, "--timeout", "2.4"]) == 0


@pytest.mark.parametrize("field, value", [("timeout", 1e12), ("grace", 1e12), ("memory_mb", 10**30),
                                          ("file_size_mb", 2**43), ("disk_mb", 2**50)])
def test_sandbox_limits_past_what_the_sandbox_can_apply_are_refused_naming_the_field(field, value):
    # timeout=1e12 used to raise a bare OverflowError from the parent's wait in the middle of a load; memory_mb
    # of 2**43 or more failed every sample of the batch with the sandbox's setrlimit traceback
    with pytest.raises(ValueError, match=f"SandboxLimits.{field} must be at most"):
        SandboxLimits(**{field: value})


def test_the_longest_limits_the_sandbox_takes_run(evil_dir):
    # a deadline weeks away: the parent waits for the child in steps (poll takes a C int of milliseconds)
    (result,) = run_sequences([one_call("add", 1, 2)], evil_dir,
                              SandboxLimits(timeout=1e8, grace=1e8, cpu_seconds=10**8, memory_mb=2**43 - 1))
    assert result.ok and result.results[0]["value"] == 3


@pytest.mark.parametrize("option, value", [("execution_timeout", 1e12), ("execution_memory_mb", 10**30)])
def test_execution_options_past_what_the_sandbox_can_apply_are_refused_naming_the_option(option, value,
                                                                                        functions_dir):
    # execution_timeout=1e12 used to stop the load with "OverflowError: timestamp too large to convert to C
    # _PyTime_t"; execution_memory_mb=10**30 skipped every row as a SandboxError with setrlimit's traceback
    with pytest.raises(ValueError, match=f"option {option} must be at most"):
        td.load("nestful", data_files=str(shared_data(*ICL)), streaming=True, execute=True,
                executable_functions=functions_dir, **{option: value})


def test_a_timeout_of_weeks_loads(functions_dir):
    # 3e6 s is past what poll() waits at once (a C int of milliseconds, about 24 days): an OverflowError before
    rows = list(td.load("nestful", data_files=str(shared_data(*ICL)), split="train", streaming=True, execute=True,
                        executable_functions=functions_dir, execution_timeout=3e6))
    assert len(rows) == 3 and all(row["meta"]["execution"]["reproduces_gold"] for row in rows)


