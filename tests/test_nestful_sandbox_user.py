"""NESTFUL sandbox for a caller running as root (Docker images, CI runners): the samples run as another user, so
file permissions protect the caller's files, RLIMIT_NPROC applies, and no capability but reading is left; where
that user cannot be switched to, the sandbox says so (``processes: partial: ...``) and ``kernel_isolation=True``
refuses.

Upstream functions run only in the sandbox's child process; each scenario runs the sandbox in a subprocess of its
own where it needs a machine unlike this one (no namespaces, as under Docker's default seccomp profile; a user
namespace mapping root alone, as in a rootless container)."""
from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import time

import pytest

from tooluse_datasets.builders.nestful.execution import SandboxLimits, SequenceJob, run_sequences
from tooluse_datasets.builders.nestful.execution import sandbox
from tooluse_datasets.builders.nestful.execution.child import BATCH_IDS, MAX_TASKS

from conftest import shared_data
from test_nestful_execution import FORK_THROUGH_LIBC

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="what a root caller's samples may do: the tests run as root")

FUNCTIONS = ("nestful", "data_v2", "executable_functions")
CURRENT = ("nestful", "third_party", "reconstructed_current_v2", "rows_github_native_format.jsonl")
LIMITS = SandboxLimits(timeout=5, cpu_seconds=5, grace=1, memory_mb=1024)

PROBES = '''
import ctypes, os, time

def who():
    with open("/proc/self/status") as f:
        caps = {line.split(":")[0]: int(line.split()[1], 16) for line in f if line.startswith("Cap")}
    return {"uid": os.getresuid(), "gid": os.getresgid(), "groups": os.getgroups(), "caps": caps}

def regain_root():
    """Every way back: the ids, then a capability set raising the lost capabilities."""
    tried = []
    for how in (lambda: os.setresuid(0, 0, 0), lambda: os.setuid(0), lambda: os.setresgid(0, 0, 0),
                lambda: os.setgroups([0])):
        try:
            how()
            tried.append("done")
        except PermissionError:
            tried.append("refused")
    return tried

def write_natively(path):
    """Open for appending through libc: no audit event, so only the kernel stands in the way."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.open(path.encode(), os.O_WRONLY | os.O_APPEND)
    if fd < 0:
        return os.strerror(ctypes.get_errno())
    os.write(fd, b"changed")
    return "written"

def write_here(name):
    with open(name, "w") as f:
        f.write("mine")
    return os.stat(name).st_uid

def lock_a_full_folder(mb):
    """Write ``mb`` MB in a folder of the sample's own that its owner may no longer write (nor so remove from)."""
    locked = os.path.abspath("locked")
    os.mkdir(locked)
    with open(os.path.join(locked, "data"), "wb") as f:
        f.write(b"x" * (mb << 20))
    os.chmod(locked, 0o500)
    return mb

def fill(mb):
    with open("data", "wb") as f:
        f.write(b"x" * (mb << 20))
    return mb

def detach_a_writer(path, seconds):
    """A process in a session of its own (out of the sandbox's process group) that writes ``path`` later; libc
    only, so no audit event sees it."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.fork() == 0:
        libc.setsid()
        time.sleep(seconds)
        libc.close(libc.open(path.encode(), os.O_WRONLY | os.O_CREAT, 0o644))
        os._exit(0)
    return 1

def detach_a_writer_and_hang(path, seconds):
    """As detach_a_writer, then the sample hangs past its timer (which it swallows): the sandbox is killed."""
    detach_a_writer(path, seconds)
    while True:
        try:
            time.sleep(60)
        except BaseException:
            pass
''' + FORK_THROUGH_LIBC  # (the native fork loop the sandbox's own tests use)
NAMES = ("who", "regain_root", "write_natively", "write_here", "lock_a_full_folder", "fill", "detach_a_writer",
         "detach_a_writer_and_hang", "fork_through_libc")


@pytest.fixture(scope="module")
def probes_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("probes")  # (0700, root's: the sample reads it as root could)
    (folder / "basic_functions.py").write_text("")
    (folder / "probes.py").write_text(PROBES)
    (folder / "func_file_map.json").write_text(json.dumps({n: "probes.py" for n in NAMES}))
    return str(folder)


def one_call(name, *args):
    call = {"name": name, "label": "$var_1", "arguments": {f"arg_{i}": a for i, a in enumerate(args)}}
    return [call], {name: ["result"]}


def job(name, *args):
    return SequenceJob(*one_call(name, *args))


def real_jobs():
    from tooluse_datasets.builders.nestful.executed import execution_job
    from tooluse_datasets.builders.nestful.source import NestfulSource
    from tooluse_datasets.source import RowContext

    source, jobs = NestfulSource(), []
    for i, line in enumerate(shared_data(*CURRENT).read_text().splitlines()):
        ctx = RowContext("nestful", "test", i, "train")
        row = source.to_unified(source.to_raw(json.loads(line), ctx), ctx)
        jobs.append((row["meta"]["sample_id"], execution_job(row)))
    return jobs


# The scenarios' subprocess: a preamble setting the machine up, then run_sequences on JSON jobs; prints the results.
RUN = """
import dataclasses, json, sys
from tooluse_datasets.builders.nestful.execution import sandbox
jobs, folder, limits = json.loads(sys.argv[1]), sys.argv[2], sandbox.SandboxLimits(**json.loads(sys.argv[3]))
try:
    results = sandbox.run_sequences([sandbox.SequenceJob(c, o, g) for c, o, g in jobs], folder, limits)
except sandbox.SandboxError as exc:
    print(json.dumps({"error": str(exc)}))
else:
    print(json.dumps([dataclasses.asdict(r) for r in results]))
"""

# Docker's default seccomp profile refuses unshare to a root without CAP_SYS_ADMIN: no namespace at all.
NO_UNSHARE = """
import ctypes, platform, struct
ARCH, UNSHARE = {"x86_64": (0xC000003E, 272), "aarch64": (0xC00000B7, 97)}[platform.machine()]
code = [(0x20, 0, 0, 4), (0x15, 0, 3, ARCH), (0x20, 0, 0, 0), (0x15, 0, 1, UNSHARE),
        (0x06, 0, 0, 0x00050000 | 1), (0x06, 0, 0, 0x7FFF0000)]  # ld arch; ld nr; unshare: EPERM; allow
program = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *op) for op in code))
fprog = struct.pack("HxxxxxxP", len(code), ctypes.addressof(program))
libc = ctypes.CDLL(None, use_errno=True)
assert libc.prctl(38, 1, 0, 0, 0) == 0 and libc.prctl(22, 2, ctypes.c_char_p(fprog), 0, 0) == 0, ctypes.get_errno()
"""

# A user namespace that maps root alone (a rootless container maps a few ids; here none but 0): no other user to be.
ROOT_ONLY = ["unshare", "--user", "--map-root-user"]


def run_in(preamble, jobs, folder, prefix=(), **limits):
    payload = json.dumps([[j.calls, j.output_fields, j.gold] for j in jobs])
    run = subprocess.run([*prefix, sys.executable, "-c", preamble + RUN, payload, folder, json.dumps(limits)],
                         capture_output=True, text=True, cwd="/", timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout)


def test_a_root_callers_samples_run_as_a_user_of_the_batch_that_cannot_go_back(probes_dir, tmp_path):
    results = run_sequences([job("who"), job("regain_root"), job("write_here", "mine.txt")], probes_dir, LIMITS)
    assert all(r.ok for r in results), [r.describe() for r in results]
    who = results[0].answer["value"]
    uid = who["uid"][0]
    assert uid != 0 and who["uid"] == who["gid"] == [uid] * 3 and who["groups"] == []
    # Reading as root did is all that is left (the functions folder here is root's own, 0700), in every set.
    assert {k: v for k, v in who["caps"].items()} == {"CapInh": 0, "CapPrm": 4, "CapEff": 4, "CapBnd": 4, "CapAmb": 0}
    assert results[1].answer["value"] == ["refused"] * 4
    assert results[2].answer["value"] == uid  # the sample's folder is that user's
    if results[0].processes == "namespace":  # (and what is reported is unchanged)
        assert results[0].filesystem == "read-only"


def test_without_namespaces_file_permissions_keep_a_sample_from_the_callers_files(probes_dir, tmp_path):
    """No namespace (unshare refused, as Docker's default seccomp profile does): nothing but the audit hook stood
    between a root caller's samples and its files; native code went around the hook and wrote them."""
    if platform.machine() not in ("x86_64", "aarch64"):
        pytest.skip(f"the seccomp filter of this test is written for x86_64 and aarch64, not {platform.machine()}")
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    victim.chmod(0o644)
    results = run_in(NO_UNSHARE, [job("write_natively", str(victim)), job("who")], probes_dir)
    assert "unshare failed" in results[0]["filesystem"] and "unshare failed" in results[0]["processes"]
    assert [r["status"] for r in results] == ["ok", "ok"], results
    assert results[0]["answer"]["value"] == "Permission denied" and victim.read_text() == "keep"
    assert results[1]["answer"]["value"]["uid"][0] != 0


def test_a_fork_loop_in_native_code_is_bounded_for_a_root_caller(probes_dir):
    """libc's fork raises no audit event; RLIMIT_NPROC bounds it, but the kernel does not apply it to root: a root
    caller's sample forked until the PID namespace ran out (or the machine did, without one). As the batch's own
    user it is bounded, the next sample gets the whole budget again, and without a PID namespace too."""
    forks = MAX_TASKS + 40
    results = run_sequences([job("fork_through_libc", forks, 60), job("fork_through_libc", 5, 0),
                             job("fork_through_libc", forks, 60)], probes_dir, LIMITS)
    assert all(r.ok for r in results), [r.describe() for r in results]
    if results[0].processes != "namespace":
        pytest.skip(f"no PID namespace here ({results[0].processes}): the forks would outlive the test")
    made, refused = results[0].answer["value"]
    assert made <= MAX_TASKS - 2 and refused == forks - made  # (the worker and the sample's process count too)
    assert [r.answer["value"] for r in results[1:]] == [[5, 0], [made, refused]]
    if platform.machine() in ("x86_64", "aarch64"):
        (alone,) = run_in(NO_UNSHARE, [job("fork_through_libc", forks, 1)], probes_dir, timeout=5, memory_mb=1024)
        assert alone["status"] == "ok" and "unshare failed" in alone["processes"], alone
        made, refused = alone["answer"]["value"]
        assert made <= MAX_TASKS - 1 and refused == forks - made  # (the sandbox's child is the worker there)


def test_real_rows_reproduce_as_the_batchs_user_with_or_without_namespaces(probes_dir):
    """The gold sequences of real rows, run from the real functions folder (read as the batch's user)."""
    functions = str(shared_data(*FUNCTIONS))
    named = real_jobs()
    jobs = [j for _, j in named] + [job("who")]
    with_namespaces = run_sequences(jobs[:-1], functions, LIMITS)
    assert all(r.ok and r.win_upstream and r.win_corrected for r in with_namespaces), [
        (name, r.describe()) for (name, _), r in zip(named, with_namespaces) if not r.ok]
    if platform.machine() not in ("x86_64", "aarch64"):
        return
    alone = run_in(NO_UNSHARE, jobs[:-1], functions)
    assert [(r["status"], r["answer"], r["win_upstream"]) for r in alone] == [
        (r.status, r.answer, r.win_upstream) for r in with_namespaces]


def test_where_no_other_user_is_mapped_the_samples_run_as_root_and_say_so(probes_dir):
    """A user namespace mapping root alone: neither the batch's own id nor nobody can be switched to. The sandbox
    runs as before, reports it in ``processes``, and refuses when kernel isolation is required."""
    if not shutil.which("unshare"):
        pytest.skip("making a user namespace that maps root alone needs util-linux's unshare")
    (tried,) = run_in("", [job("who")], probes_dir, ROOT_ONLY)
    if tried["filesystem"] != "read-only":
        pytest.skip(f"no kernel isolation in a user namespace here ({tried['filesystem']})")
    assert tried["status"] == "ok" and tried["answer"]["value"]["uid"] == [0, 0, 0]
    said = "partial: samples run as root (no other user to run as (uid "  # (the batch's own id, then nobody)
    assert tried["processes"].startswith(said) and tried["processes"].endswith("; uid 65534: Invalid argument))")
    required = run_in("", [job("who")], probes_dir, ROOT_ONLY, kernel_isolation=True)
    assert required["error"].startswith(f"sandbox: kernel isolation was required: processes {said}"), required


def test_what_a_sample_locked_is_still_removed_before_the_next_sample(probes_dir):
    """Each sample gets the whole sample area (disk_mb): its files are removed when it ends. Root removed any; the
    batch's user cannot empty a folder it made read-only without making it writable again first."""
    limits = SandboxLimits(timeout=5, cpu_seconds=5, grace=1, memory_mb=1024, disk_mb=8, file_size_mb=6)
    results = run_sequences([job("lock_a_full_folder", 5), job("fill", 5), job("lock_a_full_folder", 5),
                             job("fill", 5)], probes_dir, limits)
    if results[0].filesystem != "read-only":
        pytest.skip(f"no sample area of disk_mb here ({results[0].filesystem})")
    assert [(r.status, r.detail) for r in results] == [("ok", "")] * 4


def test_without_namespaces_what_a_sample_leaves_running_ends_with_it(probes_dir, tmp_path_factory):
    """No PID namespace: processes a sample left (in a session of their own, out of the sandbox's process group)
    lived past the batch, and as the batch's user they held its RLIMIT_NPROC budget: the next sample could not
    start its own. As the batch's own user, the worker ends them after each sample (kill(-1) reaches that user's
    processes alone) and reaps them."""
    if platform.machine() not in ("x86_64", "aarch64"):
        pytest.skip(f"the seccomp filter of this test is written for x86_64 and aarch64, not {platform.machine()}")
    shared = tmp_path_factory.mktemp("anyone")
    shared.chmod(0o777)  # (the batch's user may write here: only its processes' ending keeps the file away)
    planted = shared / "planted.txt"
    started = time.monotonic()
    results = run_in(NO_UNSHARE, [job("fork_through_libc", MAX_TASKS, 60), job("fork_through_libc", 5, 0),
                                  job("detach_a_writer", str(planted), 1.5)] + [job("who")] * 10, probes_dir)
    assert "unshare failed" in results[0]["processes"] and [r["status"] for r in results] == ["ok"] * 13, results
    assert results[1]["answer"]["value"] == [5, 0]
    # Waiting for the ended processes is not waiting out its 2 s bound after every sample (kill(-1, 0) outside a
    # PID namespace succeeds while any process of the machine is there).
    assert time.monotonic() - started < 15
    time.sleep(2.5)
    assert not planted.exists()


def test_without_namespaces_what_a_sample_leaves_running_ends_when_the_sandbox_is_killed(probes_dir,
                                                                                        tmp_path_factory):
    """No PID namespace, and a sample that hangs past its timer: the sandbox is killed, so its worker never ends
    what the sample left (a process in a session of its own, out of the sandbox's process group). That process, of
    the batch's own user, lived on past the batch and wrote where that user may."""
    if platform.machine() not in ("x86_64", "aarch64"):
        pytest.skip(f"the seccomp filter of this test is written for x86_64 and aarch64, not {platform.machine()}")
    shared = tmp_path_factory.mktemp("anyone")
    shared.chmod(0o777)
    planted = shared / "planted.txt"
    (result,) = run_in(NO_UNSHARE, [job("detach_a_writer_and_hang", str(planted), 3)], probes_dir, timeout=0.5,
                       grace=0.5, cpu_seconds=5, memory_mb=1024)
    assert "unshare failed" in result["processes"] and (result["status"], result["reason"]) == ("limit", "timeout")
    time.sleep(4)
    assert not planted.exists()
    assert sandbox.BATCH_IDS == BATCH_IDS  # (the user the caller ends is the one the child runs its samples as)
