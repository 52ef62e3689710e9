"""Mirrors built by shard tasks: one conversion per row and split, the same bytes from every engine (one process,
a process pool, Ray with 1, 2 and 3 workers), failed shards retried alone, a killed build finished by the next
run, pinned checksums checked, and a publish that fails midway leaving the Hub repository as it was."""
from __future__ import annotations

import atexit
import contextlib
import dataclasses
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

import tooluse_datasets as td
from tooluse_datasets import builder as builder_module
from tooluse_datasets.mirror import MirrorError, MirrorRequest, ShardsFailedError, build_mirror, mirror_files
from tooluse_datasets.mirror import engines as engines_module
from tooluse_datasets.mirror.manifest import read_manifest
from tooluse_datasets.mirror.provenance import build_provenance, check_pinned_checksums, fingerprint_input
from tooluse_datasets.mirror import provenance as provenance_module
from tooluse_datasets.formats import FORMATS
from tooluse_datasets.source import Upstream, UpstreamFile

from conftest import count_calls, shared_data
from fake_hub import FakeHubApi
import mirror_support
from mirror_support import build_sample_mirror, fails_unpicklably_on_shard_1


def _json_array_of_samples() -> str:
    """The ms-swift sample rows, four times over, as one JSON array (written once per test process)."""
    path = ARRAY_DIR / "agent_rows.json"
    if not path.exists():
        rows = [line for f in td.sample_files("ms_swift")["train"] if f.endswith(".jsonl")
                for line in Path(f).read_text(encoding="utf-8").splitlines() if line.strip()]
        path.write_text("[\n" + ",\n".join(rows * 4) + "\n]\n", encoding="utf-8")
    return str(path)


ARRAY_DIR = Path(tempfile.mkdtemp(prefix="mirror-array-"))
atexit.register(shutil.rmtree, ARRAY_DIR, True)


def _requests() -> dict[str, MirrorRequest]:
    """ToolMind (Parquet: one shard per row group, seven splits), ms-swift (JSON Lines cut into byte ranges) and
    ms-swift rows in one JSON array (cut between elements), every format, shards forced small so each split
    has several."""
    return {
        "toolmind": MirrorRequest("toolmind", data_files=td.sample_files("toolmind"), source_options={"shard_bytes": 1}),
        "ms_swift": MirrorRequest("ms_swift", data_files=td.sample_files("ms_swift"),
                                  source_options={"shard_bytes": 1500}),
        "ms_swift_array": MirrorRequest("ms_swift", data_files=_json_array_of_samples(),
                                        source_options={"shard_bytes": 3000}),
    }


def _shard_count(request: MirrorRequest) -> int:
    builder = td.registry.builder_class(request.source)(config_name="unified", data_files=request.data_files,
                                                      **request.source_options)
    return sum(len(plan.shards) for plan in builder.split_plans(divide=True))


def _digests(folder: Path) -> dict[str, str]:
    return {rel: hashlib.sha256((folder / rel).read_bytes()).hexdigest() for rel in mirror_files(folder)}


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict[str, dict[str, str]]:
    """Every file's sha256 of each mirror built in this process, one shard after another."""
    out = tmp_path_factory.mktemp("reference")
    return {name: _digests(build_mirror(request, out)) for name, request in _requests().items()}


def test_reference_mirrors_have_several_parts_per_split_and_every_row_once(reference, tmp_path):
    import pyarrow.parquet as pq

    for name, request in _requests().items():
        folder = build_mirror(request, tmp_path)
        assert _digests(folder) == reference[name]  # a rebuild is byte-identical
        entries = read_manifest(folder).configs["unified"].splits
        assert max(len(e.files) for e in entries.values()) > 1, f"{name}: small shards should give several parts"
        for split, entry in entries.items():
            ids = [i for f in entry.files for i in pq.read_table(folder / f, columns=["id"]).column("id").to_pylist()]
            expected = [r["id"] for r in td.load(request.source, split=split, streaming=True, on_error="skip",
                                                 data_files=request.data_files)]
            assert ids == expected, f"{name}/{split}"


def test_each_row_is_converted_once_per_split(monkeypatch, tmp_path):
    """Every config, statistics and validation from one pass: to_raw and to_unified run once per row read
    (ToolMind: seven splits from one file, each row in one split)."""
    from tooluse_datasets.builders.toolmind.source import ToolMindSource

    calls = count_calls(monkeypatch, ToolMindSource, "to_raw", "to_unified")
    folder = build_mirror(MirrorRequest("toolmind", data_files=td.sample_files("toolmind")), tmp_path)
    manifest = read_manifest(folder)
    rows = sum(s["rows_read"] for s in
               [e.skipped for e in manifest.configs["unified"].splits.values()]
               + list(manifest.configs["unified"].omitted_splits.values()))
    assert len(manifest.configs) + len(manifest.omitted_configs) == len(FORMATS) > 3
    assert len(manifest.statistics) == 7
    assert rows == sum(s["rows"] for s in manifest.statistics.values()) > 0
    assert calls == {"to_raw": rows, "to_unified": rows}


def test_num_proc_2_gives_the_same_bytes(reference, tmp_path):
    for name, request in _requests().items():
        assert _digests(build_mirror(request, tmp_path, num_proc=2)) == reference[name], name


def test_ray_with_1_2_and_3_workers_gives_the_same_bytes(reference, tmp_path):
    ray = pytest.importorskip("ray", reason="Ray is the optional extra 'ray' (pip install 'tooluse-datasets[ray]')")
    ray.init(num_cpus=3, include_dashboard=False, log_to_driver=False)  # local mode; num_proc caps the workers
    try:
        runs = [("toolmind", 1), ("toolmind", 2), ("toolmind", 3), ("ms_swift", 2),  # JSON Lines ranges: once
                ("ms_swift_array", 2)]
        for name, workers in runs:
            folder = build_mirror(_requests()[name], tmp_path / f"ray{workers}", engine="ray", num_proc=workers)
            assert _digests(folder) == reference[name], f"{name} with {workers} Ray workers"
    finally:
        ray.shutdown()


@pytest.mark.parametrize("num_proc", [1.5, "2", True])
def test_a_num_proc_that_is_not_an_integer_is_named_before_anything_is_read(num_proc, tmp_path):
    # "2" was "'<' not supported between instances of 'str' and 'int'", 1.5 "'float' object cannot be interpreted as
    # an integer" from the pool, and True was taken for 1
    with pytest.raises(MirrorError, match=f"^num_proc must be an integer \\(at least 1\\) or None, got {num_proc!r}"):
        build_mirror(MirrorRequest("nestful", configs=["raw"], data_files=td.sample_files("nestful")), tmp_path,
                     num_proc=num_proc)
    assert list(tmp_path.iterdir()) == []


def test_ray_missing_is_a_clear_error_naming_the_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    request = MirrorRequest("nestful", configs=["unified"], data_files=td.sample_files("nestful"))
    with pytest.raises(MirrorError, match=r"^engine 'ray' \(--engine ray\) needs Ray.*tooluse-datasets\[ray\]"):
        build_mirror(request, tmp_path, engine="ray")
    assert not (tmp_path / "nestful").exists()


def test_an_address_without_the_ray_engine_names_the_arguments_of_build_mirror_and_the_command(tmp_path):
    # (a build_mirror caller wrote address= and engine=, never --address or --engine)
    request = MirrorRequest("nestful", configs=["unified"], data_files=td.sample_files("nestful"))
    with pytest.raises(MirrorError, match=r"^an address \(--address\) is for engine 'ray' \(--engine ray\)$"):
        build_mirror(request, tmp_path, address="127.0.0.1:6379")
    assert list(tmp_path.iterdir()) == []


def test_a_failed_shard_is_reported_and_retried_alone(reference, monkeypatch, tmp_path):
    request = _requests()["toolmind"]
    original = engines_module.convert_shard
    calls = []

    def flaky(task):
        calls.append(task.key)
        if task.key == "xlam_function_calling_60k-00001":
            raise OSError("disk full")
        return original(task)

    monkeypatch.setattr(engines_module, "convert_shard", flaky)
    shards = _shard_count(request)
    with pytest.raises(ShardsFailedError, match=rf"1 of {shards} shards failed.*\n  xlam_function_calling_60k shard 1 "
                                                r"\(.*row groups 3\)\): OSError: disk full"):
        build_mirror(request, tmp_path)
    assert len(calls) == shards and not (tmp_path / "toolmind").exists()
    calls.clear()
    for engine, num_proc in (("local", 0), ("spark", None)):  # unusable engine options cost no finished shard
        with pytest.raises(MirrorError, match="num_proc must be at least 1|unknown engine"):
            build_mirror(request, tmp_path, engine=engine, num_proc=num_proc)
    assert calls == []
    monkeypatch.setattr(engines_module, "convert_shard", lambda task: (calls.append(task.key), original(task))[1])
    folder = build_mirror(request, tmp_path)
    assert calls == ["xlam_function_calling_60k-00001"]  # the ten finished shards were reused
    assert _digests(folder) == reference["toolmind"]


KILLED_BUILD = textwrap.dedent("""
    import sys, time
    import tooluse_datasets as td
    from tooluse_datasets.mirror import MirrorRequest, build_mirror
    from tooluse_datasets.mirror import engines

    original, finished = engines.convert_shard, []

    def slow_after_three(task):
        if len(finished) == 3:
            print("three shards done", flush=True)
            time.sleep(120)  # killed here
        finished.append(task.key)
        return original(task)

    engines.convert_shard = slow_after_three
    if __name__ == "__main__":
        request = MirrorRequest("toolmind", data_files=td.sample_files("toolmind"), source_options={"shard_bytes": 1})
        build_mirror(request, sys.argv[1])
""")


def _descendants(pid: int) -> set[int]:
    """The processes ``pid`` started, and theirs (Linux /proc): a pool's fork server and its workers."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:  # ended meanwhile
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def _long_num_proc_build(tmp_path: Path, out: Path) -> list[str]:
    """The command of a two-worker mirror build of real ms-swift rows whose shards take seconds each."""
    rows = [line for f in sorted(shared_data("ms_swift").glob("*.jsonl"))
            for line in f.read_text(encoding="utf-8").splitlines() if line.strip()]
    data = tmp_path / "agent.jsonl"
    data.write_text("\n".join(rows * 3000) + "\n", encoding="utf-8")
    return [sys.executable, "-m", "tooluse_datasets.cli", "mirror", "ms_swift", "--data-files", str(data),
            "--num-proc", "2", "--shard-size", "4MB", "--configs", "unified", "--out", str(out)]


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads processes from Linux's /proc")
def test_sigint_to_the_build_process_alone_stops_its_workers_at_once(tmp_path):
    """``kill -INT <pid>`` (a job runner, not a terminal's Ctrl-C, which reaches the workers too) took as long as
    the shards being converted (about 8 s): the pool's shutdown waited for each worker to finish its shard. Now
    the build stops at once with 130 and leaves no worker behind, and nothing under the mirror's name."""
    out = tmp_path / "out"
    command = _long_num_proc_build(tmp_path, out)
    # SIGINT at its default in the build: a runner that started the suite as a background job without job
    # control (`cmd &` in a script) left it ignored, and the build inherited that and ran to its end
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 120
        while len(_descendants(process.pid)) < 3 and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)  # the fork server, its resource tracker and a worker: shards are being converted
        workers = _descendants(process.pid)
        assert len(workers) >= 3 and process.poll() is None, "the build did not start its workers"
        time.sleep(1)
        sent = time.monotonic()
        os.kill(process.pid, signal.SIGINT)  # this process alone, not its group
        _, stderr = process.communicate(timeout=60)
        took = time.monotonic() - sent
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
    assert process.returncode == 130, stderr.decode()
    assert took < 5, f"stopping took {took:.1f}s"
    deadline = time.monotonic() + 5  # (the fork server ends when it sees its parent gone)
    while any(_running(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in workers if _running(pid)], "worker processes left running"
    # nothing under the final name; what is staged is a build to resume, not a mirror
    assert not (out / "ms_swift").exists()
    assert not out.exists() or set(os.listdir(out)) <= {".ms_swift.partial"}


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads processes from Linux's /proc")
@pytest.mark.parametrize("reaped", [True, False], ids=["reaped", "left_a_zombie"])
def test_a_build_killed_outright_leaves_no_worker_converting_into_its_staging(tmp_path, reaped):
    """``kill -9`` of a ``--num-proc`` build (or the out-of-memory killer) left its workers running for ever: under
    the fork server a worker's parent is the fork server, which stays up while any worker holds its pipe, so the
    workers never saw their parent go. They went on converting shards into the staging folder, where the next run
    writes the same parts, and then waited, each holding its memory. Now they end within seconds of the build,
    also while the build is a zombie its caller has not waited for (a ``Popen`` without ``wait()``)."""
    out = tmp_path / "out"
    command = _long_num_proc_build(tmp_path, out)
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    workers: set[int] = set()
    try:
        deadline = time.monotonic() + 120
        while len(_descendants(process.pid)) < 4 and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)  # the fork server, its resource tracker and two workers: shards are being converted
        workers = _descendants(process.pid)
        assert len(workers) >= 4 and process.poll() is None, "the build did not start its workers"
        time.sleep(1)
        os.kill(process.pid, signal.SIGKILL)  # this process alone: its workers are not told
        if reaped:
            process.wait(timeout=30)
        deadline = time.monotonic() + 10
        while any(_running(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = [pid for pid in workers if _running(pid)]
    finally:
        for pid in workers | _descendants(process.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        process.wait(timeout=30)
    assert not left, "worker processes left running after the build was killed"
    assert not (out / "ms_swift").exists()  # and nothing under the mirror's name


def test_a_build_killed_midway_leaves_no_partial_mirror_and_the_next_run_finishes_it(reference, tmp_path, monkeypatch):
    out = tmp_path / "out"
    previous = build_mirror(MirrorRequest("toolmind", configs=["raw"], data_files=td.sample_files("toolmind")), out)
    before = _digests(previous)
    script = tmp_path / "killed_build.py"
    script.write_text(KILLED_BUILD)
    process = subprocess.Popen([sys.executable, str(script), str(out)], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 120
        line = b""
        while b"three shards done" not in line and time.monotonic() < deadline and process.poll() is None:
            line = process.stdout.readline()
        assert b"three shards done" in line, "the build did not get three shards done"
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL
    assert _digests(out / "toolmind") == before  # the previous mirror, untouched
    assert sorted(p.name for p in out.iterdir()) == [".toolmind.partial", "toolmind"]

    # The staging is kept for builds of the same code: this process hashed the package when it first built;
    # hash it again, as the killed process did, so that an edit made meanwhile in a shared checkout does not
    # count as a code change (in CI nothing changes).
    monkeypatch.setattr(builder_module, "_CODE_HASH", None)
    ran = []
    original = engines_module.convert_shard
    engines_module.convert_shard = lambda task: (ran.append(task.key), original(task))[1]
    try:
        folder = build_mirror(_requests()["toolmind"], out)
    finally:
        engines_module.convert_shard = original
    assert len(ran) == _shard_count(_requests()["toolmind"]) - 3  # the three finished shards were reused
    assert _digests(folder) == reference["toolmind"]
    assert sorted(p.name for p in out.iterdir()) == ["toolmind"]


def test_pinned_checksums_are_checked_against_what_was_read(tmp_path, monkeypatch):
    data = tmp_path / "upstream.jsonl"
    data.write_bytes(Path(td.sample_files("nestful")["train"][0]).read_bytes())
    digest, size = hashlib.sha256(data.read_bytes()).hexdigest(), data.stat().st_size
    read = {str(data): fingerprint_input(str(data))}
    pinned = UpstreamFile(split="train", path="upstream.jsonl", sha256=digest, num_bytes=size)
    check_pinned_checksums([(str(data), pinned)], read)  # matches: no error
    with pytest.raises(MirrorError, match=f"has sha256 {digest}, but {'0' * 64} is pinned"):
        check_pinned_checksums([(str(data), dataclasses.replace(pinned, sha256="0" * 64))], read)
    with pytest.raises(MirrorError, match=f"has {size} bytes, but {size + 1} are pinned"):
        check_pinned_checksums([(str(data), dataclasses.replace(pinned, num_bytes=size + 1))], read)
    # and a build reading its upstream runs the check on the files it fingerprints
    upstream = Upstream(host="github", repo="someone/data", revision="c0ffee",
                        files=(dataclasses.replace(pinned, sha256="0" * 64),))
    monkeypatch.setattr(provenance_module, "upstream_locations", lambda up, rev: [(str(data), up.files[0])])
    with pytest.raises(MirrorError, match="changed at a pinned revision"):
        build_provenance(upstream, None, [str(data)], from_upstream=True)
    upstream_ok = dataclasses.replace(upstream, files=(pinned,))
    provenance = build_provenance(upstream_ok, None, [str(data)], from_upstream=True)
    assert provenance.origin == "upstream" and provenance.inputs[0].sha256 == digest


class _FailingHub(FakeHubApi):
    """Uploads the first files of a commit, then loses the connection (as a push can fail midway)."""

    def __init__(self, fail_after: int):
        super().__init__()
        self.fail_after = fail_after
        self.failing = False

    def create_commit(self, repo_id, operations, **kwargs):
        if not self.failing:
            return super().create_commit(repo_id, operations, **kwargs)

        def cut(ops):
            for i, op in enumerate(ops):
                if i == self.fail_after:
                    raise ConnectionError("connection reset while uploading")
                yield op

        return super().create_commit(repo_id, cut(operations), **kwargs)


def test_a_publish_that_fails_midway_leaves_the_repository_unchanged(tmp_path):
    from tooluse_datasets.publish import PublishError, publish_mirror

    repo = "acme/nestful-tooluse"
    api = _FailingHub(fail_after=2)
    first = build_sample_mirror("nestful", tmp_path / "a", configs=["unified"])
    publish_mirror(first, repo, api=api, echo=lambda line: None)
    files, commits = api.files(repo), [c.sha for c in api.commits(repo)]
    changed = build_sample_mirror("nestful", tmp_path / "b", configs=["unified", "raw"])
    api.failing = True
    with pytest.raises(PublishError, match="connection to the Hub failed") as info:
        publish_mirror(changed, repo, api=api, echo=lambda line: None)
    assert isinstance(info.value.__cause__, ConnectionError)
    assert api.files(repo) == files and [c.sha for c in api.commits(repo)] == commits
    api.failing = False
    assert publish_mirror(changed, repo, api=api, echo=lambda line: None).committed  # a retry completes it
    assert set(api.files(repo)) == set(mirror_files(changed)) | {".gitattributes"}


def test_two_builds_of_one_mirror_do_not_share_a_staging_folder(tmp_path):
    from tooluse_datasets.mirror.staging import Staging

    running = Staging.open(tmp_path / "nestful", {"a build": "in progress"})  # holds the lock, as a live build
    try:
        request = MirrorRequest("nestful", configs=["unified"], data_files=td.sample_files("nestful"))
        with pytest.raises(MirrorError, match="another build is writing"):
            build_mirror(request, tmp_path)
        assert (running.folder / ".build.json").is_file()  # the running build's staging is untouched
    finally:
        running.release()
    assert build_mirror(request, tmp_path) == tmp_path / "nestful"  # once released, it is taken over
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nestful"]


def test_ray_workers_running_elsewhere_write_the_parts_of_a_relative_out_folder(reference, tmp_path, monkeypatch):
    """Ray's usual ``runtime_env={"working_dir": ...}`` runs every task in a copy of that folder, as tasks on
    other nodes run in another folder: a relative out folder must still get its parts."""
    ray = pytest.importorskip("ray", reason="Ray is the optional extra 'ray' (pip install 'tooluse-datasets[ray]')")
    job = tmp_path / "job"
    job.mkdir()
    (job / "train.py").write_text("print('the job')\n")
    monkeypatch.chdir(job)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"working_dir": ".", "excludes": ["mirrors"]})
    try:
        folder = build_mirror(_requests()["ms_swift"], "mirrors", engine="ray", num_proc=2)
    finally:
        ray.shutdown()
    assert _digests(job / folder) == reference["ms_swift"]


def test_ray_workers_running_elsewhere_read_a_relative_executable_functions_folder(tmp_path, monkeypatch):
    """A relative path in a source option (NESTFUL's executable_functions) names a folder where the build was
    started: Ray tasks running in a copy of the working folder (or on other nodes) must read that folder, as a
    local build does, not fail every shard with 'not a NESTFUL executable_functions folder'."""
    ray = pytest.importorskip("ray", reason="Ray is the optional extra 'ray' (pip install 'tooluse-datasets[ray]')")
    from conftest import shared_data

    functions = shared_data("nestful", "data_v2", "executable_functions")
    job = tmp_path / "job"
    job.mkdir()
    os.symlink(functions, job / "functions")  # on a shared filesystem, left out of the job's package
    monkeypatch.chdir(job)
    request = MirrorRequest("nestful", configs=["unified"], data_files=td.sample_files("nestful"),
                            source_options={"execute": True, "executable_functions": "functions"})
    local = build_mirror(request, job / "local")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"working_dir": ".", "excludes": ["functions", "local", "mirrors"]})
    try:
        folder = build_mirror(request, "mirrors", engine="ray", num_proc=2)
    finally:
        ray.shutdown()
    assert _digests(job / folder) == _digests(local)


def test_on_error_raise_names_the_first_bad_row_in_plan_order_whatever_the_engine(tmp_path):
    """Two workers: the second shard starts with a bad row, the first ends with one after many good rows. The
    second shard fails first, but the build's answer is the bad row a single process meets: the first one."""
    good = [line for f in td.sample_files("ms_swift")["train"] for line in Path(f).read_text().splitlines() if line]
    head = "\n".join(good * 150) + "\n" + '{"messages": [{"role": "user", "content": "cut' + "\n"
    data = tmp_path / "rows.jsonl"
    data.write_text(head + "[1, 2]\n" + "\n".join(good * 40) + "\n", encoding="utf-8")
    request = MirrorRequest("ms_swift", configs=["unified"], data_files=str(data), on_error="raise",
                            source_options={"shard_bytes": len(head.encode()) - 3})
    plan = td.registry.builder_class("ms_swift")(config_name="unified", data_files=str(data),
                                                 **request.source_options).split_plans(divide=True)[0]
    assert len(plan.shards) == 2
    first_bad = len(good) * 150  # 0-based row of the cut line, the last row of shard 0; shard 1 starts with [1, 2]
    engines = [{}, {"num_proc": 2}]
    ray = None
    try:
        import ray
    except ImportError:
        pass
    if ray is not None:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        engines.append({"engine": "ray", "num_proc": 2})
    try:
        for options in engines:
            with pytest.raises(td.errors.InvalidJsonError) as info:
                build_mirror(request, tmp_path / "out", **options)
            assert (info.value.row, info.value.field) == (first_bad, "<line>"), options
            assert "not valid JSON" in str(info.value), options
            assert not (tmp_path / "out" / "ms_swift").exists()
    finally:
        if ray is not None:
            ray.shutdown()


def test_ray_address_from_the_environment_with_num_proc_and_a_local_ray_beside_that_cluster(reference, monkeypatch):
    """On a cluster (a `ray job submit` job, a cluster node) RAY_ADDRESS names the cluster: --num-proc then caps
    the tasks, and no local Ray is started with num_cpus (which Ray refuses when it connects to a cluster).
    Without an address, the build starts a Ray of its own, also on a machine where `ray start` left a cluster:
    Ray's own default joined that cluster, and the build failed with "ValueError: When connecting to an existing
    cluster, num_cpus and num_gpus must not be provided"."""
    pytest.importorskip("ray", reason="Ray is the optional extra 'ray' (pip install 'tooluse-datasets[ray]')")
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ray_tmpdir = tempfile.mkdtemp(prefix="ray")  # short: Ray's sockets live there
    temp = os.path.join(ray_tmpdir, "ray")  # Ray's default folder under RAY_TMPDIR, where `ray start` notes its address
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    ray_cli = str(Path(sys.executable).with_name("ray"))
    head = subprocess.Popen([ray_cli, "start", "--head", "--block", "--num-cpus", "2", "--port", str(port),
                             "--node-ip-address", "127.0.0.1", "--include-dashboard=false", "--temp-dir", temp],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    out = Path(tempfile.mkdtemp(prefix="mirror-cluster-"))
    try:
        deadline = time.monotonic() + 120
        for line in head.stdout:
            if "Ray runtime started" in line or time.monotonic() > deadline:
                break
        monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
        monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{port}")
        folder = build_mirror(_requests()["ms_swift"], out / "cluster", engine="ray", num_proc=2)
        assert _digests(folder) == reference["ms_swift"]

        monkeypatch.delenv("RAY_ADDRESS")
        monkeypatch.setenv("RAY_TMPDIR", ray_tmpdir)  # where Ray looks for the cluster `ray start` left
        assert Path(temp, "ray_current_cluster").is_file()
        folder = build_mirror(_requests()["ms_swift"], out / "local", engine="ray", num_proc=2)
        assert _digests(folder) == reference["ms_swift"]
    finally:
        shutil.rmtree(out, ignore_errors=True)
        os.killpg(head.pid, signal.SIGKILL)  # the head and every process it started
        head.wait(timeout=30)
        shutil.rmtree(ray_tmpdir, ignore_errors=True)


@pytest.mark.parametrize("given", ["argument", "environment", "environment_and_auto"])
def test_an_address_where_no_ray_cluster_answers_is_refused_at_once_and_stages_nothing(given, tmp_path, monkeypatch):
    """Ray itself retries such an address for minutes, printing only its own warnings. With ``--address auto``
    (the README's cluster example) Ray connects to RAY_ADDRESS where it is set: that one is checked."""
    pytest.importorskip("ray", reason="Ray is the optional extra 'ray' (pip install 'tooluse-datasets[ray]')")
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"
    if given.startswith("environment"):
        monkeypatch.setenv("RAY_ADDRESS", address)
    started = time.monotonic()
    with pytest.raises(engines_module.EngineUnavailableError, match=f"no Ray cluster answers at '{address}'.* "
                                                                    r"correct address \(--address\) / RAY_ADDRESS$"):
        build_mirror(_requests()["ms_swift"], tmp_path / "out", engine="ray",
                     address={"argument": address, "environment": None, "environment_and_auto": "auto"}[given])
    assert time.monotonic() - started < 30
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())



def test_an_address_where_another_server_answers_is_refused_at_once(tmp_path):
    """The dashboard's address (host:8265, where `ray job submit` goes) given for the cluster's: the port accepts
    connections, so the build went on to ray.init, which retried it for two minutes before failing."""
    pytest.importorskip("ray", reason="Ray is the optional extra 'ray' (pip install 'tooluse-datasets[ray]')")
    import http.server
    import threading

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    address = f"127.0.0.1:{server.server_address[1]}"
    started = time.monotonic()
    try:
        with pytest.raises(engines_module.EngineUnavailableError, match=f"what answers at '{address}' is not a Ray "
                                                                        f"cluster.*8265 is the dashboard's\\) in "
                                                                        r"address \(--address\) / RAY_ADDRESS$"):
            build_mirror(_requests()["ms_swift"], tmp_path / "out", engine="ray", address=address)
    finally:
        server.shutdown()
        server.server_close()
    assert time.monotonic() - started < 30
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())

@contextlib.contextmanager
def _callers_sigterm_handler():
    """A SIGTERM handler of the caller's own (a server's or a job runner's), in place while the block runs.
    ray.init replaces it with one that calls sys.exit, and ray.shutdown leaves that one: a build that starts Ray
    puts the caller's back when it stops Ray."""
    def handler(signum, frame):
        raise AssertionError("not sent")

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield handler
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_build_that_fails_taking_the_results_stops_its_ray_at_once(tmp_path, monkeypatch):
    """A failure in this process while shard results come in (a full disk saving one) used to leave the Ray
    started for the build running, its other tasks still converting, as long as the error was kept (a terminal's
    progress bar let go of the engine's generator without closing it): the next build in the session then ran
    on that leftover Ray and left it running too."""
    import io

    ray = pytest.importorskip("ray", reason="Ray is the optional extra 'ray' (pip install 'tooluse-datasets[ray]')")
    if ray.is_initialized():
        ray.shutdown()

    class Terminal(io.StringIO):  # stderr on a terminal: the progress bar is shown
        def isatty(self):
            return True

    def full_disk(self, key, task_id, result):
        raise OSError(28, "No space left on device")

    # Ray reads its auth mode once per process: as the cluster test before it, whatever the order.
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.setattr(sys, "stderr", Terminal())
    monkeypatch.setattr("tooluse_datasets.mirror.staging.Staging.save_result", full_disk)
    with _callers_sigterm_handler() as handler:
        with pytest.raises(OSError, match="No space left") as info:
            build_mirror(_requests()["ms_swift"], tmp_path / "out", engine="ray", num_proc=2)
        sigterm_after = signal.getsignal(signal.SIGTERM)
    try:
        assert not ray.is_initialized(), "the Ray started for the build is still running"
        assert sigterm_after is handler, "ray.init's SIGTERM handler (sys.exit) was left in place of the caller's"
    finally:
        del info
        ray.shutdown()


def test_mirror_of_several_sources_on_ray_starts_one_local_ray_for_all(tmp_path, monkeypatch):
    """`mirror nestful ms_swift --engine ray` started and stopped a local Ray for each source: seconds each, and
    Ray 2.60 keeps a socket open in the calling process per start-up. One Ray now serves every source and is
    stopped at the end; the mirrors are the local engine's, byte for byte."""
    ray = pytest.importorskip("ray", reason="Ray is the optional extra 'ray' (pip install 'tooluse-datasets[ray]')")
    from tooluse_datasets.cli import main

    if ray.is_initialized():
        ray.shutdown()
    starts = []
    real_init = ray.init
    monkeypatch.setattr(ray, "init", lambda *args, **kwargs: (starts.append(kwargs), real_init(*args, **kwargs))[1])
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # as the other tests that start Ray in this process
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    command = ["mirror", "nestful", "ms_swift", "--sample", "--configs", "unified", "raw", "--shard-size", "2000"]
    assert main([*command, "--out", str(tmp_path / "local")]) == 0
    with _callers_sigterm_handler() as handler:
        assert main([*command, "--engine", "ray", "--num-proc", "2", "--out", str(tmp_path / "ray")]) == 0
        assert signal.getsignal(signal.SIGTERM) is handler, "ray.init's SIGTERM handler was left in place"
    assert len(starts) == 1, f"{len(starts)} Ray start-ups for one command"
    assert not ray.is_initialized(), "the Ray started for the command is still running"
    for source in ("nestful", "ms_swift"):
        assert _digests(tmp_path / "ray" / source) == _digests(tmp_path / "local" / source), source


def test_a_ray_worker_with_other_versions_than_the_build_refuses_its_shards(tmp_path, monkeypatch):
    """Ray nodes install their own packages (a cluster image): a node with another tooluse-datasets, datasets or
    pyarrow wrote other rows or bytes than the card, which records the driver's versions, says. Each shard task
    now checks them; here the build records another version of this package than the workers run."""
    ray = pytest.importorskip("ray", reason="Ray is the optional extra 'ray' (pip install 'tooluse-datasets[ray]')")
    from tooluse_datasets.mirror import build as build_module
    from tooluse_datasets.mirror.shard_task import worker_runtime

    if ray.is_initialized():
        ray.shutdown()
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # as the other tests that start Ray in this process
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    runtime = dict(worker_runtime())
    monkeypatch.setattr(build_module, "worker_runtime", lambda: tuple({**runtime, "tooluse-datasets": "0.0.1"}.items()))
    request = _requests()["ms_swift"]
    with pytest.raises(ShardsFailedError, match=rf"(?s){_shard_count(request)} of {_shard_count(request)} shards "
                                                rf"failed.*MirrorError: this worker runs tooluse-datasets "
                                                rf"{td.__version__} \(the build has 0\.0\.1\)"):
        build_mirror(request, tmp_path / "out", engine="ray", num_proc=2)
    assert not (tmp_path / "out" / "ms_swift").exists()
    assert build_mirror(request, tmp_path / "local") == tmp_path / "local" / "ms_swift"  # checked on Ray only


def test_ray_retries_a_worker_that_died_midway_without_duplicating_or_losing_rows(tmp_path, monkeypatch):
    """A Ray worker that dies (the out-of-memory killer, a lost node) is retried by Ray on another worker: the
    retry writes the shard's parts and skipped-rows listing again under the same names, so the mirror and the
    listing are those of a local build. Here every shard's first attempt dies after writing its first row group."""
    ray = pytest.importorskip("ray", reason="Ray is the optional extra 'ray' (pip install 'tooluse-datasets[ray]')")
    if ray.is_initialized():
        ray.shutdown()
    marks = tmp_path / "died"
    marks.mkdir()
    original = engines_module.convert_shard

    def dies_once_midway(task, _original=original, _marks=str(marks)):
        import os
        from pathlib import Path

        from tooluse_datasets.mirror.parts import PartWriter

        mark = Path(_marks) / task.key
        if not mark.exists():  # first attempt: die once a row group is on disk
            mark.touch()
            write = PartWriter._write_row_group

            def write_then_die(self, group):
                write(self, group)
                os._exit(1)

            PartWriter._write_row_group = write_then_die
        return _original(task)

    request = dataclasses.replace(_requests()["ms_swift"], layout=dataclasses.replace(
        _requests()["ms_swift"].layout, row_group_rows=1))
    local = build_mirror(dataclasses.replace(request, skipped_rows=str(tmp_path / "local-skipped.jsonl")),
                         tmp_path / "local")
    monkeypatch.setattr(engines_module, "convert_shard", dies_once_midway)
    folder = build_mirror(dataclasses.replace(request, skipped_rows=str(tmp_path / "ray-skipped.jsonl")),
                          tmp_path / "ray", engine="ray", num_proc=2)
    assert sorted(p.name for p in marks.iterdir()) == [f"train-{i:05d}" for i in range(_shard_count(request))]
    assert _digests(folder) == _digests(local)
    listing = (tmp_path / "ray-skipped.jsonl").read_bytes()
    assert listing == (tmp_path / "local-skipped.jsonl").read_bytes() and listing.count(b"\n") == 3


@pytest.mark.parametrize("engine", ["local", "ray"])
def test_a_shard_failing_with_an_exception_that_cannot_be_pickled_names_it_in_one_line(engine, tmp_path, monkeypatch):
    """A shard failing with an exception that cannot be pickled (aiohttp's error for a 503 of an https:// data file
    holds the response's headers) reached the build as Ray's "isn't serializable" error with a worker traceback
    in its text, or from a process pool as the pickling error alone ("TypeError: cannot pickle '_thread.lock'
    object"). The failure is now its type and message, as a build in one process names it."""
    request = _requests()["ms_swift"]
    monkeypatch.setattr(engines_module, "convert_shard", fails_unpicklably_on_shard_1)
    with contextlib.ExitStack() as stack:
        if engine == "ray":
            ray = pytest.importorskip("ray", reason="Ray is the optional extra 'ray' "
                                                    "(pip install 'tooluse-datasets[ray]')")
            if ray.is_initialized():
                ray.shutdown()
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
            stack.callback(ray.shutdown)
            ray.cloudpickle.register_pickle_by_value(mirror_support)  # its workers cannot import the tests' modules
            stack.callback(ray.cloudpickle.unregister_pickle_by_value, mirror_support)
        with pytest.raises(ShardsFailedError) as info:
            build_mirror(request, tmp_path, engine=engine, num_proc=2)
    assert str(info.value).endswith("): OSError: 503 Service Unavailable"), str(info.value)
    assert f"1 of {_shard_count(request)} shards failed" in str(info.value)


def test_every_row_error_comes_back_from_a_ray_task_as_its_own_type(caplog):
    """Ray raises a task's error as one of its own exceptions made of the error's type too, setting its ``cause``:
    ExecutionError (NESTFUL's execute=True, a row failing under on_error="raise") had a read-only property of that
    name, so a Ray build printed Ray's warning "Failed to combine RayTaskError with user exception type ..." above
    the row's error."""
    pytest.importorskip("ray", reason="Ray is the optional extra 'ray' (pip install 'tooluse-datasets[ray]')")
    from ray.exceptions import RayTaskError

    kinds = [kind for kind in vars(td.errors).values()
             if isinstance(kind, type) and issubclass(kind, td.errors.ToolUseDataError)]
    assert td.errors.ExecutionError in kinds
    for kind in kinds:
        error = kind("timeout: the calls took too long", field="output[1]",
                     **({"rule": "arguments.schema"} if kind is td.errors.RuleViolationError else {}))
        raised = RayTaskError("_in_worker", "Traceback (most recent call last): ...", error).as_instanceof_cause()
        assert isinstance(raised, kind) and raised.cause is error, kind.__name__
    assert not [r for r in caplog.records if "Failed to combine RayTaskError" in r.getMessage()]
    assert td.errors.ExecutionError("timeout: the calls took too long").reason == "ExecutionError:timeout"


_TERMINATED_MIDWAY = """
import os, signal, sys
from pathlib import Path
from tooluse_datasets.cli import main
from tooluse_datasets.mirror.staging import Staging

save = Staging.save_result

def save_then_terminate(self, *args):  # SIGTERM once the first shard is done: Ray is up, tasks are running
    save(self, *args)
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rpartition(")")[2].split()[1])
        except OSError:  # ended meanwhile
            pass
    mine, grew = {os.getpid()}, True
    while grew:
        found = {pid for pid, parent in parents.items() if parent in mine}
        grew, mine = not found <= mine, mine | found
    Path(sys.argv[1]).write_text(" ".join(str(p) for p in mine - {os.getpid()}))
    os.kill(os.getpid(), signal.SIGTERM)

Staging.save_result = save_then_terminate
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads processes from Linux's /proc")
def test_sigterm_to_a_ray_build_exits_143_and_stops_the_ray_it_started(tmp_path):
    """`timeout` or a job runner stopping `mirror --engine ray` midway: ray.init's SIGTERM handler (sys.exit(15))
    stood in for the command's, so the build exited 15, and the Ray driver's crash reporter, set under it, printed a
    stack dump and at times aborted the process (134). It now exits 143 as a local build does, staging no mirror
    under its final name and leaving none of the Ray processes it started."""
    pytest.importorskip("ray", reason="Ray is the optional extra 'ray' (pip install 'tooluse-datasets[ray]')")
    out, started = tmp_path / "out", tmp_path / "ray-processes"
    env = {key: value for key, value in os.environ.items() if key != "RAY_ADDRESS"}
    process = subprocess.run(
        [sys.executable, "-c", _TERMINATED_MIDWAY, str(started), "mirror", "ms_swift", "--sample", "--configs",
         "unified", "--shard-size", "1500", "--engine", "ray", "--num-proc", "2", "--out", str(out)],
        env={**env, "RAY_AUTH_MODE": "disabled"}, capture_output=True, text=True, timeout=300)
    assert process.returncode == 143, process.stderr
    assert "SIGTERM received" not in process.stderr, process.stderr
    assert not (out / "ms_swift").exists()
    ray_processes = [int(pid) for pid in started.read_text().split()]
    assert ray_processes, "the build started no Ray of its own"
    deadline = time.monotonic() + 30
    while any(_running(pid) for pid in ray_processes) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [pid for pid in ray_processes if _running(pid)], "Ray processes left running"


_TERMINATED_WHILE_RAY_STARTS = """
import os, signal, sys, threading, time
import ray
from tooluse_datasets.cli import main

start = ray.init

def init_then_terminate(*args, **kwargs):  # SIGTERM once ray.init has set its handler, while Ray starts
    ours = signal.getsignal(signal.SIGTERM)

    def terminate():
        while signal.getsignal(signal.SIGTERM) is ours:
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=terminate, daemon=True).start()
    return start(*args, **kwargs)

ray.init = init_then_terminate
sys.exit(main(sys.argv[1:]))
"""


def test_sigterm_while_the_ray_of_a_build_starts_exits_143(tmp_path):
    """ray.init sets its SIGTERM handler (sys.exit(15)) first thing: a build stopped in the seconds Ray takes to
    start exited 15. The command's own handler now answers it: 143, nothing staged. (A signal that lands while Ray
    forks its processes runs Ray's handler inside a fork hook, where Python prints the SystemExit and ignores it:
    the build then goes on, exit 0. That race is Ray's: up to three tries, each must end 143 or in that race, and
    one must end 143. Before, every try ended 15 or in the race.)"""
    pytest.importorskip("ray", reason="Ray is the optional extra 'ray' (pip install 'tooluse-datasets[ray]')")
    env = {key: value for key, value in os.environ.items() if key != "RAY_ADDRESS"}
    for attempt in range(3):
        out = tmp_path / f"out{attempt}"
        process = subprocess.run(
            [sys.executable, "-c", _TERMINATED_WHILE_RAY_STARTS, "mirror", "ms_swift", "--sample", "--configs",
             "unified", "--engine", "ray", "--num-proc", "1", "--out", str(out)],
            env={**env, "RAY_AUTH_MODE": "disabled"}, capture_output=True, text=True, timeout=300)
        if process.returncode == 143:
            assert not out.exists() or not any(out.iterdir())
            return
        lost_in_a_fork_hook = (process.returncode == 0 and "Exception ignored in" in process.stderr
                               and "SystemExit: 15" in process.stderr)
        assert lost_in_a_fork_hook, (process.returncode, process.stderr[-2000:])
    pytest.fail("every try's SIGTERM landed in a fork hook of Ray's start-up")


def _ms_swift_sample_copy(folder: Path) -> list[Path]:
    """The bundled ms-swift sample's JSON Lines files, copied into ``folder`` (a test may rewrite them)."""
    folder.mkdir()
    copies = [Path(shutil.copy(f, folder)) for f in td.sample_files("ms_swift")["train"] if f.endswith(".jsonl")]
    assert len(copies) == 2
    return copies


def _rewrite_reversed(path: Path) -> None:
    """The same rows in the other order: the same size, other contents."""
    lines = path.read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join(reversed(lines)) + "\n", encoding="utf-8")


@pytest.mark.parametrize("engine", ["local", "ray"])
def test_an_input_rewritten_between_planning_and_building_fails_the_mirror(engine, tmp_path):
    """`mirror a b` plans every source before building any, so a file can change in between (and on a long Ray
    build, while it runs). Each of its shards then counted one skipped item and the build went on: a mirror of
    the other file's rows alone, exit 0, its card giving the rewritten file's sha256."""
    from tooluse_datasets.mirror.build import build_planned_mirror, plan_mirror

    if engine == "ray":
        ray = pytest.importorskip("ray", reason="Ray is the optional extra 'ray' (pip install 'tooluse-datasets[ray]')")
        if ray.is_initialized():
            ray.shutdown()
    first, second = _ms_swift_sample_copy(tmp_path / "data")
    request = MirrorRequest("ms_swift", configs=["unified"], data_files=[str(first), str(second)],
                            source_options={"shard_bytes": 1500})
    plan = plan_mirror(request, tmp_path / "out")
    _rewrite_reversed(second)
    with pytest.raises(MirrorError, match=rf"the input file {second.name} changed while the mirror was built"):
        build_planned_mirror(plan, engine=engine, num_proc=2)
    assert sorted(os.listdir(tmp_path / "out")) == [], "a mirror or its staging folder was left"
    # Once the file is final, the same command builds the mirror of what is there now.
    folder = build_mirror(request, tmp_path / "out", engine=engine, num_proc=2)
    assert _digests(folder) == _digests(build_mirror(request, tmp_path / "local"))
    assert "InvalidValueError:<file>" not in str(read_manifest(folder).configs["unified"].splits["train"].skipped)


@pytest.mark.parametrize("engine", ["local", "ray"])
def test_an_input_deleted_between_planning_and_building_is_named(engine, tmp_path):
    """Hashing the inputs, before anything is staged, met the file gone: a bare FileNotFoundError."""
    from tooluse_datasets.errors import DataNotFoundError
    from tooluse_datasets.mirror.build import build_planned_mirror, plan_mirror

    if engine == "ray":
        ray = pytest.importorskip("ray", reason="Ray is the optional extra 'ray' (pip install 'tooluse-datasets[ray]')")
        if ray.is_initialized():
            ray.shutdown()
    first, second = _ms_swift_sample_copy(tmp_path / "data")
    plan = plan_mirror(MirrorRequest("ms_swift", configs=["unified"], data_files=[str(first), str(second)]),
                       tmp_path / "out")
    second.unlink()
    with pytest.raises(DataNotFoundError, match=rf"{re.escape(str(second))}: the input file is not there any more: "
                                                r"it was deleted or moved since the mirror was planned"):
        build_planned_mirror(plan, engine=engine, num_proc=2)
    assert not (tmp_path / "out").exists() or os.listdir(tmp_path / "out") == []


def test_an_input_of_a_later_source_deleted_while_the_first_is_built_is_one_error_line(tmp_path, monkeypatch,
                                                                                        capsys):
    """`mirror a b` plans both sources, then builds them in turn: b's file deleted meanwhile."""
    from tooluse_datasets.cli import main

    first, second = _ms_swift_sample_copy(tmp_path / "data")
    other = Path(shutil.copy(td.sample_files("llamafactory")["train"][0], tmp_path / "data"))
    convert = engines_module.convert_shard

    def convert_then_delete(task):
        other.unlink(missing_ok=True)
        return convert(task)

    monkeypatch.setattr(engines_module, "convert_shard", convert_then_delete)
    status = main(["mirror", "ms_swift", "llamafactory", "--configs", "unified", "--out", str(tmp_path / "out"),
                   "--data-files", f"ms_swift={first}", f"ms_swift={second}", f"llamafactory={other}"])
    assert status == 2
    assert capsys.readouterr().err.splitlines() == [
        f"error: {other}: the input file is not there any more: it was deleted or moved since the mirror was "
        f"planned; nothing was built: build it again with the file where it is now"]


def test_an_input_rewritten_while_the_mirror_is_built_fails_it(tmp_path, monkeypatch):
    """A JSON array rewritten after the build hashed it, while shards run: the card would give a sha256 of a file
    the mirror was not read from, and its shards' rows would come from two versions."""
    first, _ = _ms_swift_sample_copy(tmp_path / "data")
    rows = [line for line in first.read_text(encoding="utf-8").splitlines() if line.strip()]
    array = tmp_path / "data" / "more.json"
    array.write_text("[\n" + ",\n".join(rows) + "\n]\n", encoding="utf-8")
    convert = engines_module.convert_shard

    def convert_then_rewrite(task):
        result = convert(task)
        if array.read_text(encoding="utf-8").startswith("[\n"):
            array.write_text("[" + ",".join(reversed(rows)) + "]\n", encoding="utf-8")  # once, after the first shard
        return result

    monkeypatch.setattr(engines_module, "convert_shard", convert_then_rewrite)
    request = MirrorRequest("ms_swift", configs=["unified"], data_files=[str(first), str(array)],
                            source_options={"shard_bytes": 1500})
    with pytest.raises(MirrorError, match=r"the input file more\.json changed while the mirror was built \(since the "
                                          r"build was planned it is shorter"):
        build_mirror(request, tmp_path / "out")
    assert sorted(os.listdir(tmp_path / "out")) == []


@pytest.mark.parametrize("auth_mode", [None, "disabled", "token"])
def test_a_cluster_refusing_the_driver_names_the_token_setting_ray_needs_for_an_explicit_address(
        auth_mode, monkeypatch):
    """`ray start --head` (Ray 2.60) enables token authentication, and ray.init sends the token to a host:port
    only with RAY_AUTH_MODE=token, even with the token in ~/.ray/auth_token: `mirror --address 127.0.0.1:6379`
    logged "InvalidAuthToken" for 20 seconds, then failed with "Failed to connect to Ray cluster at ...", naming
    no setting. (ray.init's answer is stood in for here: Ray's retries take 20 seconds.)"""
    ray = pytest.importorskip("ray", reason="Ray is the optional extra 'ray' (pip install 'tooluse-datasets[ray]')")
    if auth_mode is None:
        monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    else:
        monkeypatch.setenv("RAY_AUTH_MODE", auth_mode)

    def refused(*args, **kwargs):
        raise ConnectionError("Failed to connect to Ray cluster at 192.0.2.2:6379")

    monkeypatch.setattr(ray, "init", refused)
    with pytest.raises(engines_module.EngineUnavailableError) as info:
        engines_module._start_ray(ray, None, "127.0.0.1:6379")
    message = str(info.value)
    assert message.startswith("cannot connect to a Ray cluster at '127.0.0.1:6379': Failed to connect")
    assert "\n" not in message
    assert ("set RAY_AUTH_MODE=token" in message) == (auth_mode != "token"), message


def _recorded_cancels(ray, monkeypatch) -> list:
    """The refs ``ray.cancel`` is called with from here on (each still cancelled)."""
    cancelled = []
    real_cancel = ray.cancel
    monkeypatch.setattr(ray, "cancel", lambda ref, **kwargs: (cancelled.append(ref), real_cancel(ref, **kwargs)))
    return cancelled


def _bad_row_first_request(tmp_path: Path) -> MirrorRequest:
    """An ms_swift mirror whose first shard holds a bad row (its first line) and the sample rows, and whose second
    shard converts for a while (the sample rows 2,000 times), under on_error="raise"."""
    good = [line for f in td.sample_files("ms_swift")["train"] for line in Path(f).read_text().splitlines() if line]
    head = "[1, 2]\n" + "\n".join(good) + "\n"
    data = tmp_path / "rows.jsonl"
    data.write_text(head + "\n".join(good * 2000) + "\n", encoding="utf-8")
    return MirrorRequest("ms_swift", configs=["unified"], data_files=str(data), on_error="raise",
                         source_options={"shard_bytes": len(head.encode())})


def test_a_ray_build_stopped_midway_leaves_its_tasks_to_the_ray_it_stops_and_resumes(reference, tmp_path,
                                                                                     monkeypatch):
    """Ctrl-C in a Ray build on a Ray of its own: the build force-cancelled its running tasks before stopping that
    Ray, and a task whose reply was on its way crashed Ray 2.60's driver ("Check failed: ... Tried to complete
    task that was not pending", exit 1 instead of 130; 2 of 6 `kill -INT` with --num-proc 1). Stopping the Ray
    ends its tasks anyway: nothing is cancelled, nothing is left running, and the next run finishes the build."""
    ray = pytest.importorskip("ray", reason="Ray is the optional extra 'ray' (pip install 'tooluse-datasets[ray]')")
    if ray.is_initialized():
        ray.shutdown()
    cancelled = _recorded_cancels(ray, monkeypatch)
    from tooluse_datasets.mirror.staging import Staging

    saved = Staging.save_result

    def interrupted_after_one(self, key, task_id, result):
        saved(self, key, task_id, result)
        raise KeyboardInterrupt  # Ctrl-C once the first shard is in

    monkeypatch.setattr(Staging, "save_result", interrupted_after_one)
    request = _requests()["ms_swift"]
    with pytest.raises(KeyboardInterrupt):
        build_mirror(request, tmp_path / "out", engine="ray", num_proc=2)
    assert not ray.is_initialized(), "the Ray started for the build is still running"
    assert cancelled == [], "tasks were cancelled on a Ray the build was about to stop"
    monkeypatch.setattr(Staging, "save_result", saved)
    folder = build_mirror(request, tmp_path / "out", engine="ray", num_proc=2)
    assert _digests(folder) == reference["ms_swift"]


def test_a_late_task_of_a_stopped_build_writes_nothing_the_next_build_of_other_input_holds(tmp_path, monkeypatch):
    """On a Ray that goes on after a build (the caller's own), a build stopped midway leaves its running tasks to
    finish. A build of other input started meanwhile in the same folder wrote its parts under the same names, so
    such a task finishing late wrote over them: the new mirror's files were not those its manifest names (seen on
    a caller's Ray: Ctrl-C, then a build of other files). Here that task is run once the new build's first shard
    is done."""
    from tooluse_datasets.mirror.shard_task import convert_shard

    first, second = _ms_swift_sample_copy(tmp_path / "data")
    stopped = MirrorRequest("ms_swift", configs=["unified"], data_files=[str(first), str(second)],
                            source_options={"shard_bytes": 1500})
    started = []

    def interrupted(task):
        started.append(task)
        raise KeyboardInterrupt  # Ctrl-C while the first task runs

    monkeypatch.setattr(engines_module, "convert_shard", interrupted)
    with pytest.raises(KeyboardInterrupt):
        build_mirror(stopped, tmp_path / "out")

    def then_the_late_task(task):
        result = convert_shard(task)
        if task.index == 0:
            convert_shard(started[0])  # the stopped build's task, still running on that Ray, ends now
        return result

    monkeypatch.setattr(engines_module, "convert_shard", then_the_late_task)
    request = dataclasses.replace(stopped, data_files=[str(second), str(first)])
    folder = build_mirror(request, tmp_path / "out")
    for data_file in read_manifest(folder).files:
        assert hashlib.sha256((folder / data_file.path).read_bytes()).hexdigest() == data_file.sha256, data_file.path
    monkeypatch.undo()
    assert _digests(folder) == _digests(build_mirror(request, tmp_path / "clean"))


def test_a_late_task_of_a_stopped_build_appends_nothing_to_the_skipped_rows_of_its_rerun(tmp_path, monkeypatch):
    """The same build run again at once on a Ray that goes on (Ctrl-C, then the same cell again) converts a shard
    the stopped build's task still converts: that task opened the shard's listing of skipped rows after the new
    task had started it, both appended their rows, and --skipped-rows listed each of them twice (seen: 4000 lines
    for 2000 skipped rows). Here that late task's appending is stood in for while the new task converts."""
    from tooluse_datasets.mirror import shard_task
    from tooluse_datasets.pipeline import ShardConverter

    request = MirrorRequest("ms_swift", configs=["unified", "llamafactory"], data_files=td.sample_files("ms_swift"),
                            skipped_rows=str(tmp_path / "skipped.jsonl"))
    build_mirror(dataclasses.replace(request, skipped_rows=str(tmp_path / "clean.jsonl")), tmp_path / "clean")
    listings = []
    real_convert, real_batches = shard_task.convert_shard, ShardConverter.batches

    def convert(task):
        listings.append(shard_task.skipped_rows_file(Path(task.parts_dir), "llamafactory", task.key))
        return real_convert(task)

    def batches_beside_a_late_task(self, *args, **kwargs):
        for batch in real_batches(self, *args, **kwargs):
            yield batch
            with open(listings[-1], "ab") as late:  # the stopped build's task, converting the same rows
                late.write(b'{"row": 0, "error": "ConversionError"}\n')

    monkeypatch.setattr(engines_module, "convert_shard", convert)
    monkeypatch.setattr(ShardConverter, "batches", batches_beside_a_late_task)
    build_mirror(request, tmp_path / "out")
    assert (tmp_path / "skipped.jsonl").read_bytes() == (tmp_path / "clean.jsonl").read_bytes()


def test_a_task_of_a_stopped_build_starting_late_removes_nothing_from_the_skipped_rows_of_its_rerun(tmp_path,
                                                                                                     monkeypatch):
    """A task of the stopped build waiting for a CPU of a busy Ray starts once the rerun's task converted the same
    shard: its start removed that shard's listing of skipped rows, and a rerun listing them before it ended left
    them out of --skipped-rows. Here it starts then, and is still converting when the rerun lists them."""
    request = MirrorRequest("ms_swift", configs=["unified", "llamafactory"], data_files=td.sample_files("ms_swift"),
                            skipped_rows=str(tmp_path / "skipped.jsonl"))
    build_mirror(dataclasses.replace(request, skipped_rows=str(tmp_path / "clean.jsonl")), tmp_path / "clean")

    def still_converting(real_batches, self, *args, **kwargs):
        raise _LateTaskStopped  # (the task's end, which lists nothing, is not what is looked at)
        yield

    _with_a_late_task(monkeypatch, still_converting)
    build_mirror(request, tmp_path / "out")
    assert (tmp_path / "clean.jsonl").read_bytes()
    assert (tmp_path / "skipped.jsonl").read_bytes() == (tmp_path / "clean.jsonl").read_bytes()


def test_a_task_of_a_stopped_build_failing_late_deletes_no_part_of_its_rerun(tmp_path, monkeypatch):
    """A task of the stopped build starting once the rerun's task converted the same shard wrote its parts under the
    same names, truncating the rerun's, and failing deleted them: the rerun stopped on "part ... is missing". Here
    it fails after its first row group."""
    from tooluse_datasets.mirror.parts import ParquetLayout

    request = MirrorRequest("ms_swift", configs=["unified"], data_files=td.sample_files("ms_swift"),
                            layout=ParquetLayout(row_group_rows=1))

    def first_batch_then_stopped(real_batches, self, *args, **kwargs):
        yield next(real_batches(self, *args, **kwargs))
        raise _LateTaskStopped

    _with_a_late_task(monkeypatch, first_batch_then_stopped)
    folder = build_mirror(request, tmp_path / "out")
    monkeypatch.undo()
    assert _digests(folder) == _digests(build_mirror(request, tmp_path / "clean"))


def test_a_bad_row_on_a_ray_of_the_builds_own_leaves_the_later_tasks_to_that_ray(tmp_path, monkeypatch):
    """on_error="raise", the bad row in the first shard while the second still converts: the build force-cancelled
    that later task before stopping the Ray it started, which races with the task's reply as a Ctrl-C's cancels
    did (Ray 2.60's driver crashes, exit 1, instead of naming the row). Stopping the Ray ends the task; the error
    is the bad row, and no Ray is left running."""
    ray = pytest.importorskip("ray", reason="Ray is the optional extra 'ray' (pip install 'tooluse-datasets[ray]')")
    if ray.is_initialized():
        ray.shutdown()
    request = _bad_row_first_request(tmp_path)
    cancelled = _recorded_cancels(ray, monkeypatch)
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # as the other tests that start Ray in this process
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with pytest.raises(td.errors.InvalidJsonError) as info:
        build_mirror(request, tmp_path / "out", engine="ray", num_proc=2)
    assert (info.value.row, info.value.field) == (0, "<line>")
    assert not ray.is_initialized(), "the Ray started for the build is still running"
    assert cancelled == [], "a task was cancelled on a Ray the build was about to stop"
    assert not (tmp_path / "out" / "ms_swift").exists()


def test_a_ray_of_the_builds_own_keeps_rays_token_authentication_without_its_notice(tmp_path):
    """Without RAY_AUTH_MODE, the Ray a build starts takes token authentication (Ray 2.60's default) and Ray printed
    "Token authentication is enabled for this Ray cluster. Set RAY_AUTH_MODE=disabled to opt out" on every
    `mirror --engine ray`, advice about a Ray that ends with the build. The notice is gone; the authentication
    stays: the token Ray generates for it is in the (fresh) home folder."""
    pytest.importorskip("ray", reason="Ray is the optional extra 'ray' (pip install 'tooluse-datasets[ray]')")
    home = tmp_path / "home"
    home.mkdir()
    env = {key: value for key, value in os.environ.items() if key not in ("RAY_ADDRESS", "RAY_AUTH_MODE")}
    process = subprocess.run(
        [sys.executable, "-m", "tooluse_datasets.cli", "mirror", "nestful", "--sample", "--configs", "unified",
         "--engine", "ray", "--num-proc", "1", "--out", str(tmp_path / "out")],
        env={**env, "HOME": str(home)}, capture_output=True, text=True, timeout=300)
    assert process.returncode == 0, process.stderr
    assert "Token authentication" not in process.stderr, process.stderr
    assert (home / ".ray" / "auth_token").is_file(), "the build's Ray ran without token authentication"


def test_on_the_callers_own_ray_a_bad_row_or_a_stop_cancels_nothing_and_leaves_that_ray_usable(tmp_path, monkeypatch):
    """build_mirror(engine="ray") inside the caller's ray.init(): a bad row under on_error="raise" (or a Ctrl-C)
    force-cancelled the tasks still running, which races with a task's reply and crashed Ray 2.60's driver, the
    caller's own process ("Tried to complete task that was not pending", exit 1; 3 of 5 runs of four Ctrl-C's).
    Nothing is cancelled now: the bad row waits for the running task, then names the row as the local engine does,
    with no staging folder left behind; a stopped build leaves its tasks to end; the caller's Ray goes on."""
    ray = pytest.importorskip("ray", reason="Ray is the optional extra 'ray' (pip install 'tooluse-datasets[ray]')")
    if ray.is_initialized():
        ray.shutdown()
    request = _bad_row_first_request(tmp_path)
    cancelled = _recorded_cancels(ray, monkeypatch)
    from tooluse_datasets.mirror.staging import Staging

    saved = Staging.save_result

    def interrupted_after_one(self, key, task_id, result):
        saved(self, key, task_id, result)
        raise KeyboardInterrupt  # Ctrl-C once the first shard is in

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        with pytest.raises(td.errors.InvalidJsonError) as info:
            build_mirror(request, tmp_path / "out", engine="ray", num_proc=2)
        assert (info.value.row, info.value.field) == (0, "<line>")
        assert not any((tmp_path / "out").iterdir()), "a staging folder is left (or written into after the error)"
        monkeypatch.setattr(Staging, "save_result", interrupted_after_one)
        with pytest.raises(KeyboardInterrupt):
            build_mirror(_requests()["ms_swift"], tmp_path / "stopped", engine="ray", num_proc=2)
        assert cancelled == [], "tasks were cancelled on the caller's Ray"
        assert ray.is_initialized(), "the caller's Ray was shut down"
        assert ray.get(ray.remote(lambda: 7).remote()) == 7, "the caller's Ray no longer runs tasks"
    finally:
        ray.shutdown()


def test_a_bad_row_on_a_ray_shared_by_several_builds_leaves_no_task_writing_into_the_discarded_staging(
        tmp_path, monkeypatch):
    """`mirror` of several sources runs every build on one Ray, which goes on after a build ends. A bad row
    (on_error="raise") left the tasks still running to that Ray, as if the build stopped it: the build deleted its
    staging folder while a later shard still converted, and that shard then wrote its parts there, leaving a staging
    folder behind in --out. The build now waits for them, as on the caller's own Ray."""
    ray = pytest.importorskip("ray", reason="Ray is the optional extra 'ray' (pip install 'tooluse-datasets[ray]')")
    if ray.is_initialized():
        ray.shutdown()
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # as the other tests that start Ray in this process
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    good = [line for f in td.sample_files("ms_swift")["train"] for line in Path(f).read_text().splitlines() if line]
    bad, rows = tmp_path / "a_bad.jsonl", tmp_path / "b_rows.jsonl"
    bad.write_text("[1, 2]\n", encoding="utf-8")  # the first shard: its row 0 is bad at once
    rows.write_text("\n".join(good * 3000) + "\n", encoding="utf-8")  # the second: converting for a while
    request = MirrorRequest("ms_swift", configs=["unified"], data_files=[str(bad), str(rows)], on_error="raise")
    out = tmp_path / "out"
    with engines_module.shared_ray("ray", 2, None):
        with pytest.raises(td.errors.InvalidJsonError) as info:
            build_mirror(request, out, engine="ray", num_proc=2)
        assert (Path(info.value.file).name, info.value.row) == ("a_bad.jsonl", 0)
        deadline = time.monotonic() + 120
        while ray.available_resources().get("CPU", 0) < ray.cluster_resources().get("CPU", 0):
            assert time.monotonic() < deadline, "a task of the failed build still runs"
            time.sleep(0.2)  # (its later shard, if it was left running: let it end)
        assert not any(out.iterdir()), "a task wrote into the staging folder the error deleted"
    assert not ray.is_initialized()


class _LateTaskStopped(Exception):
    pass


def _with_a_late_task(monkeypatch, late_batches):
    """Each shard task is followed by a task of a stopped build converting the same shard, its batches
    ``late_batches(real_batches, converter, ...)``, which stops with _LateTaskStopped."""
    from tooluse_datasets.mirror import shard_task
    from tooluse_datasets.pipeline import ShardConverter

    real_convert, real_batches = shard_task.convert_shard, ShardConverter.batches

    def late(self, *args, **kwargs):
        return late_batches(real_batches, self, *args, **kwargs)

    def convert_then_the_late_task(task):
        result = real_convert(task)
        monkeypatch.setattr(ShardConverter, "batches", late)
        with pytest.raises(_LateTaskStopped):
            real_convert(task)
        monkeypatch.setattr(ShardConverter, "batches", real_batches)
        return result

    monkeypatch.setattr(engines_module, "convert_shard", convert_then_the_late_task)


def test_a_task_of_a_stopped_build_whose_staging_folder_went_ends_quietly_and_makes_none(tmp_path, monkeypatch):
    """On a Ray that goes on (the caller's), a build stopped before any shard finished deletes its staging folder
    while its tasks still run. A task converting then failed with a FileNotFoundError no one waited for, which Ray
    printed as a raw traceback in the caller's process later; one starting then made the folder again, without its
    build record, so that reading the mirror said a build was stopped while replacing it, the new mirror staged,
    and recover_swap or publish did nothing about it. Such a task now returns, naming the folder, and makes none."""
    from tooluse_datasets.mirror.manifest import StoppedSwapError
    from tooluse_datasets.mirror.parts import ParquetLayout
    from tooluse_datasets.mirror.shard_task import ABANDONED, convert_shard
    from tooluse_datasets.pipeline import ShardConverter

    request = MirrorRequest("ms_swift", configs=["unified"], data_files=td.sample_files("ms_swift"),
                            layout=ParquetLayout(row_group_rows=1))
    started = []

    def interrupted(task):
        started.append(task)
        raise KeyboardInterrupt  # Ctrl-C while the first task runs

    monkeypatch.setattr(engines_module, "convert_shard", interrupted)
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        build_mirror(request, out)
    assert not any(out.iterdir()), "no shard finished: the staging folder goes"
    assert ABANDONED in convert_shard(started[0])  # the stopped build's task starts now
    assert not any(out.iterdir()), "a task of the stopped build made its staging folder again"
    with pytest.raises(MirrorError, match="does not exist") as info:
        read_manifest(out / "ms_swift")
    assert not isinstance(info.value, StoppedSwapError)
    real_batches = ShardConverter.batches

    def staging_deleted_midway(self, *args, **kwargs):
        for batch in real_batches(self, *args, **kwargs):
            yield batch
            shutil.rmtree(out / ".ms_swift.partial", ignore_errors=True)  # the stop, while this task converts

    Path(started[0].parts_dir).mkdir(parents=True)
    monkeypatch.setattr(ShardConverter, "batches", staging_deleted_midway)
    assert started[0].parts_dir in convert_shard(started[0])[ABANDONED]
    assert not any(out.iterdir())
    # deleted as the task starts, between its look for the folder and the making of its listings' folders
    from tooluse_datasets.mirror import shard_task

    real_listing = shard_task.skipped_rows_file

    def staging_deleted_at_start(*args, **kwargs):
        shutil.rmtree(out / ".ms_swift.partial", ignore_errors=True)
        return real_listing(*args, **kwargs)

    Path(started[0].parts_dir).mkdir(parents=True)
    monkeypatch.setattr(shard_task, "skipped_rows_file", staging_deleted_at_start)
    assert started[0].parts_dir in convert_shard(started[0])[ABANDONED]
    assert not any(out.iterdir())


def test_a_task_of_a_stopped_build_failing_late_on_the_callers_ray_prints_no_traceback_there(tmp_path, monkeypatch,
                                                                                           capfd):
    """On the caller's own Ray, a build stopped midway leaves its running tasks to end. One that then met a bad row
    (on_error="raise") raised it to no one, and Ray printed "Unhandled error" with the worker's whole traceback in
    the caller's process seconds later. The stopped build's tasks end quietly now."""
    ray = pytest.importorskip("ray", reason="Ray is the optional extra 'ray' (pip install 'tooluse-datasets[ray]')")
    if ray.is_initialized():
        ray.shutdown()
    good = [line for f in td.sample_files("ms_swift")["train"] for line in Path(f).read_text().splitlines() if line]
    quick, slow = tmp_path / "a_quick.jsonl", tmp_path / "b_slow.jsonl"
    quick.write_text(good[0] + "\n", encoding="utf-8")
    slow.write_text("\n".join(good * 2000) + "\n[1, 2]\n", encoding="utf-8")  # its bad row last
    request = MirrorRequest("ms_swift", configs=["unified"], data_files=[str(quick), str(slow)], on_error="raise",
                            source_options={"shard_bytes": 10**9})  # one shard a file
    from tooluse_datasets.mirror.staging import Staging

    saved = Staging.save_result

    def interrupted_after_one(self, key, task_id, result):
        saved(self, key, task_id, result)
        raise KeyboardInterrupt  # Ctrl-C once the quick shard is in, the slow one still converting

    monkeypatch.setattr(Staging, "save_result", interrupted_after_one)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        with pytest.raises(KeyboardInterrupt):
            build_mirror(request, tmp_path / "out", engine="ray", num_proc=2)
        deadline = time.monotonic() + 120
        while ray.available_resources().get("CPU", 0) < ray.cluster_resources().get("CPU", 0):
            assert time.monotonic() < deadline, "the stopped build's slow task still runs"
            time.sleep(0.2)
        time.sleep(2)  # (Ray reports an error no one fetched once its task has ended)
    finally:
        ray.shutdown()
    printed = capfd.readouterr()
    assert "Unhandled error" not in printed.err + printed.out, printed.err[-2000:]


def test_a_build_of_other_input_empties_a_staging_folder_a_late_task_still_writes_into(tmp_path):
    """On the caller's own Ray, a stopped build's task goes on writing its parts (a file per part) into the staging
    folder. A build of other input started meanwhile emptied that folder in place, and failed with a raw
    "OSError: [Errno 39] Directory not empty: 'unified'" when the task made a file during the deletion (1 run in 3
    on a Ray with parts of one row each), its staging left locked by the process. Here a thread writes as that
    task does."""
    import threading

    out = tmp_path / "out"
    mirror_support.stop_a_first_build("ms_swift", out)
    staging = out / ".ms_swift.partial"
    late_folder = next((staging / ".parts").iterdir()) / "unified"
    for i in range(2000):  # the parts it wrote so far
        (late_folder / f"train-00001-{i:03d}.parquet").write_bytes(b"part")
    stopped = threading.Event()

    def late_task():
        i = 2000
        while not stopped.is_set():
            try:  # (a task never makes its parts folder again: make_folder_below)
                (late_folder / f"train-00001-{i:03d}.parquet").write_bytes(b"part")
            except FileNotFoundError:
                return  # its folder is gone: the task abandons its shard
            i += 1

    writer = threading.Thread(target=late_task)
    writer.start()
    try:
        folder = build_sample_mirror("ms_swift", out, configs=["raw"])  # other input: the staging is emptied
    finally:
        stopped.set()
        writer.join()
    assert read_manifest(folder).configs.keys() == {"raw"}
    assert sorted(p.name for p in out.iterdir() if p.name != ".ms_swift.lock") == ["ms_swift"]


def test_a_staging_folder_moved_aside_and_not_wholly_deleted_goes_with_the_next_deletion(tmp_path):
    """A folder moved aside for deletion keeps what a late task wrote into it after its deletion (or what a file
    system would not delete, as NFS keeps a file still open): the next deletion beside that mirror removes it, so
    hidden .<source>.deleted-* folders do not pile up."""
    out = tmp_path / "out"
    mirror_support.stop_a_first_build("ms_swift", out)
    left = out / ".ms_swift.deleted-0123456789ab"
    (left / "unified").mkdir(parents=True)
    (left / "unified" / "train-00001-000.parquet").write_bytes(b"part")
    build_sample_mirror("ms_swift", out, configs=["raw"])
    assert not left.exists()
    assert sorted(p.name for p in out.iterdir() if p.name != ".ms_swift.lock") == ["ms_swift"]
