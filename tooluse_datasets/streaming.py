"""Streaming a split shard by shard: rows go from the converter to the user as Python values, never through
Arrow and back, and a saved position resumes at the next row without re-reading what was consumed.

:class:`ShardExamplesIterable` is what a source builder's ``as_streaming_dataset`` iterates. Its shards are
file regions (:mod:`tooluse_datasets.shards`), so ``split_dataset_by_node``, DataLoader workers and
``n_shards`` divide even a single large file. Plain iteration takes the Python path; formatted iteration
(``with_format("arrow" | "numpy" | "torch")``, ``.iter`` with a format) takes Arrow tables built by the same
converter, so both give the same rows.

``state_dict()`` records, per shard, the position after the last row handed out (the next row number and,
for JSON Lines, its byte offset); ``load_state_dict()`` makes the reader start there.

With ``num_proc`` > 1 (``load(..., streaming=True, num_proc=N)``), the next shards are converted ahead in N
worker processes while rows of the current one are handed out, in the same order: the same rows, N cores.
"""
from __future__ import annotations

import collections
import concurrent.futures
import copy
import dataclasses
import hashlib
import itertools
import json
import multiprocessing
from typing import Any, Callable, Iterator, Optional

import numpy as np
from datasets import Features
from datasets.iterable_dataset import _BaseExamplesIterable

from .codec import json_bytes, loads_stored
from .datasets_patches import patched_once
from .errors import JsonValueError, SkipReport, ToolUseDataError, listed_skipped_rows
from .node_share import NodeShare, install as share_skips_among_nodes
from .pipeline import ShardConverter, gc_paused, piece_rows
from .resume_state import install as check_saved_states
from .shards.paths import display_path, resume_name
from .shards.plan import cut_at_lines, resharded
from .shards.shard import FileVersion, Shard
from .shards.versions import from_state_token, state_token
from .shuffle_resume import install as warn_of_lost_shuffle_buffers
from .source import Source, SplitPlan
from .worker_resume import install as resume_in_each_workers_part
from .workers import exit_with_parent, forking_workers


class ShardExamplesIterable(_BaseExamplesIterable):
    def __init__(self, source: Source, config: str, split: SplitPlan, shards: list[Shard], *, on_error: str,
                 report: Optional[SkipReport], features: Features, num_proc: Optional[int] = None,
                 row_check: Optional[Callable[[dict], Optional[Exception]]] = None,
                 node_share: Optional[tuple[int, int]] = None):
        super().__init__()
        self.row_check = row_check
        # (nodes, node) when nodes split this stream row by row: the report counts this node's share only.
        self.node_share = node_share
        self.source = source
        self.config = config
        self.split = split
        self.shards = list(shards)
        self.on_error = on_error
        self.report = report
        self._features = features
        self.num_proc = num_proc
        # datasets asks every examples iterable whether to pause when threads reading it shut down (a
        # workaround for pyarrow's dataset fragments, which shuffling and interleaving read from threads); our
        # readers use ParquetFile, not fragments, and the base class has no default for a leaf iterable.
        self._sleep_on_threads_shutdown = False
        # How far the report has counted this stream (see _note_counted): a resume that reads rows again from an
        # earlier state (datasets' map, filter, formats and shuffle replay from one) does not count them twice.
        self._counted: Optional[tuple[int, int]] = None
        self._iterated = False
        # Whether this pass resumes a saved state (see _start): the run it resumes may have read past that state
        # (a DataLoader worker's prefetched batches, rows read after the last checkpoint) and listed those rows'
        # skips in the report's rows_path, which this pass then does not list again.
        self._resumed = False
        # The epoch of the stream this pass is of (set where datasets prepares it): each epoch lists its skipped rows
        # once more in the report's rows_path, a resumed one too (see SkipsInOrder).
        self.epoch = 0
        self._fresh_state: Optional[dict] = None
        # By shard, the versions of their files that the states loaded into this stream were saved from, which
        # those shards are read against: see _note_saved_version.
        self._saved_versions: dict[int, FileVersion] = {}

    # -- what datasets asks of an examples iterable ------------------------------------------------

    @property
    def features(self) -> Features:
        return self._features

    @property
    def is_typed(self) -> bool:
        # Python rows leave in their decoded form, but Arrow tables hold JSON as text, which a formatter must
        # still decode: datasets reads "typed" as "no decoding needed" for both.
        return False

    @property
    def num_shards(self) -> int:
        return len(self.shards)

    @property
    def iter_arrow(self):
        return self._iter_arrow

    def __deepcopy__(self, memo: dict) -> "ShardExamplesIterable":
        # The report is the caller's, filled as rows pass: datasets deep-copies examples iterables where it
        # joins streams (a split 'a+b', concatenate_datasets, interleave_datasets), and a copy of the report
        # would count every read and skip where no one looks.
        if self.report is not None:
            memo[id(self.report)] = self.report
        clone = self.__class__.__new__(self.__class__)
        memo[id(self)] = clone
        clone.__dict__.update(copy.deepcopy(self.__dict__, memo))
        return clone

    def _with_shards(self, shards: list[Shard]) -> "ShardExamplesIterable":
        out = ShardExamplesIterable(self.source, self.config, self.split, shards, on_error=self.on_error,
                                    report=self.report, features=self._features, num_proc=self.num_proc,
                                    row_check=self.row_check, node_share=self.node_share)
        out.epoch = self.epoch  # (a DataLoader worker's shards are split off after the epoch was told)
        return out

    def shared_by_nodes(self, nodes: int, node: int) -> "ShardExamplesIterable":
        # datasets' step over this stream: every node reads every row and keeps every nodes-th (node_share).
        if self.node_share is not None:
            return self
        clone = self._with_shards(self.shards)
        clone.node_share = (nodes, node)
        return clone

    def shuffle_data_sources(self, generator: np.random.Generator) -> "ShardExamplesIterable":
        order = copy.deepcopy(generator).permutation(len(self.shards))
        return self._with_shards([self.shards[i] for i in order])

    def shard_data_sources(self, num_shards: int, index: int, contiguous: bool = True) -> "ShardExamplesIterable":
        indices = self.split_shard_indices_by_worker(num_shards, index, contiguous=contiguous)
        return self._with_shards([self.shards[i] for i in indices])

    def reshard_data_sources(self) -> "ShardExamplesIterable":
        # IterableDataset.reshard(): more, smaller shards, for more DataLoader workers or nodes than shards.
        return self._with_shards(resharded(self.shards, self.source.options.shard_bytes))

    def _init_state_dict(self) -> dict:
        self._note_counted()
        # "shards" names the shard list the positions refer to: loaded into a stream planned otherwise (other
        # files, another shard_bytes), a state would silently skip or repeat rows, so _start refuses it.
        # "file_version": the contents of the file the position is in (see shards.versions), so that a file
        # replaced since, even by one of the same layout, is refused rather than read from that position.
        # "node": (nodes, node) where nodes split the stream row by row: every node's stream has the same shards, so
        # only this tells a state of node 0 from one of node 1 (whose positions would skip the other's rows).
        self._state_dict = {"shard_idx": 0, "position": None, "shards": self._shards_signature(),
                            "node_rows": 0, "node": list(self.node_share) if self.node_share else None,
                            "file_version": None, "type": self.__class__.__name__}
        self._fresh_state = dict(self._state_dict)
        return self._state_dict

    def load_state_dict(self, state_dict: dict) -> dict:
        self._note_counted()
        self._resumed = True
        loaded = super().load_state_dict(state_dict)
        if isinstance(state_dict, dict) and "file_version" not in state_dict and self._state_dict:
            self._state_dict["file_version"] = None  # a state saved before versions were kept: not one of ours
        return loaded

    def _note_counted(self) -> None:
        """Remember the furthest state loaded into this stream before it starts reading: the rows before it were
        counted in the report already. datasets loads the saved (latest) state first, then, where a layer above
        replays from an earlier state (a map or filter batch, the Arrow batch a format or ``map`` slices rows
        from, a shuffle's prefetched row), loads that one and reads again from there: those rows are handed out
        to that layer again, but not counted again. A new pass over the stream (after one was read) counts
        afresh."""
        if self._iterated:
            self._counted, self._iterated, self._resumed, self._saved_versions = None, False, False, {}
            return
        state = getattr(self, "_state_dict", None)
        if not state or state.get("shards") != self._shards_signature():
            return
        position = state.get("position")
        mark = (state["shard_idx"], position[0] if position is not None else 0)
        if self._counted is None or mark > self._counted:
            self._counted = mark
        self._note_saved_version(state)

    def _note_saved_version(self, state: dict) -> None:
        """Remember the version of its file a loaded state was saved from (of the shard it is in; past the last
        shard, of the last), which that shard is then read against: a file replaced since is its error when the
        shard is opened (raised, or with on_error="skip" reported), not rows read from a position in other
        contents. Every state loaded counts: where a layer above replays from an earlier state (see _note_counted),
        that one may name no version (a shard's start, taken before its first row) or the file before (the end of
        the last batch read there), while the rows handed out since came from the file the latest state names. A
        file is checked once, in the first of its shards read."""
        position = state.get("position")
        past_the_end = position is None and state["shard_idx"] == len(self.shards)
        shard_idx = state["shard_idx"] - past_the_end
        saved = from_state_token(state.get("file_version"))
        if (position is None and not past_the_end) or not 0 <= shard_idx < len(self.shards) or saved is None \
                or self.shards[shard_idx].version is None:
            return
        file = self.shards[shard_idx].file
        self._saved_versions = {i: v for i, v in self._saved_versions.items() if self.shards[i].file != file}
        self._saved_versions[shard_idx] = saved

    def _shard_to_read(self, shard_idx: int) -> Shard:
        """Shard ``shard_idx``, with the version of its file a loaded state was saved from, if one was (see
        _note_saved_version)."""
        saved = self._saved_versions.get(shard_idx)
        shard = self.shards[shard_idx]
        return shard if saved is None else dataclasses.replace(shard, version=saved)

    def _shards_signature(self, *, named_split: bool = True, named_members: bool = True) -> str:
        """The number of shards and a digest of the split's name and of their files' names (not folders: data
        moved elsewhere still resumes; a zip archive's file with its path in the archive) and regions, and in a
        mix of sources, of the member source reading each. The split: splits of one file may be the same regions
        (a Parquet file of one row group, every ToolMind split in it), where a position in one split skips rows of
        another. The member: a file read by another source gives other rows. ``named_split=False``,
        ``named_members=False``: the digests states had before they named them (see _start)."""
        regions = [(resume_name(s.file), s.kind, list(s.row_groups), s.start, s.stop)
                   + ((s.member,) if named_members and getattr(s, "member", "") else ()) for s in self.shards]
        named = [self.split.name, regions] if named_split else regions
        digest = hashlib.sha256(json.dumps(named).encode()).hexdigest()[:16]
        return f"{len(self.shards)} shards, {digest}"

    # -- iteration ---------------------------------------------------------------------------------

    def _converter(self, report: Any) -> ShardConverter:
        reports = {self.config: report} if report is not None else None
        return ShardConverter(self.source, [self.config], on_error=self.on_error, reports=reports,
                              row_check=self.row_check)

    def _skips(self) -> Optional["SkipsInOrder"]:
        if self.report is None:
            return None
        share = None
        if self.node_share is not None:
            share = NodeShare(*self.node_share, handed=(self._state_dict or {}).get("node_rows", 0))
        listed_in = None
        if self._resumed and self.report.rows_path is not None:
            listed_in = (self.report.rows_path, {display_path(shard.file) for shard in self.shards}, self.epoch)
        return SkipsInOrder(self.report, counted=self._counted, share=share, listed_in=listed_in)

    def _start(self) -> tuple[int, Optional[tuple[int, int]]]:
        self._note_counted()
        self._iterated = True
        state = self._state_dict
        if not state:
            return 0, None
        # A saved state reaches this stream through our load_state_dict, or, below a layer of datasets (a
        # DataLoader worker's rebatching), written into the state dict in place: either way it is not the state
        # this pass started with.
        self._resumed = self._resumed or state != self._fresh_state
        ours = self._shards_signature()
        # A state at the very start (shard 0, no position) resumes any shard list alike: it is what a DataLoader
        # worker reports before it has handed out a row, taken before the worker divided the shards, so its
        # "shards" names the whole list; refusing it would stop a legitimate resume.
        started = state["shard_idx"] != 0 or state.get("position") is not None
        # Saved by an earlier version, whose digest left the split (or a mix's member sources) out: which split it
        # was taken from cannot be told (train/x.jsonl and test/x.jsonl of one size were alike), so it is not
        # resumed, but said so.
        unnamed = {}
        if started and state.get("shards", ours) != ours:
            unnamed = {self._shards_signature(named_split=False, named_members=False): "their split",
                       self._shards_signature(named_members=False): "the source reading each file of a mix"}
        if state.get("shards") in unnamed:
            raise ValueError(f"{self.source.name}: this state_dict was saved by an earlier version of "
                             f"tooluse_datasets, whose states do not name {unnamed[state['shards']]}: it cannot be "
                             "told whether it was taken from this stream or another of the same file names and "
                             "regions, so it is not resumed (rows could be skipped or read twice). Start this split's "
                             "stream again (or `.skip(n)` the rows it had handed out)")
        if (started and state.get("shards", ours) != ours) or not 0 <= state["shard_idx"] <= len(self.shards):
            raise ValueError(f"{self.source.name}: this state_dict was taken from a stream of other shards "
                             f"({state.get('shards')}; this stream has {ours}): a state resumes the stream it was "
                             "taken from, loaded with the same data_files, split and shard_bytes (and split across "
                             "nodes or workers the same way), else rows would be skipped or read twice")
        node = list(self.node_share) if self.node_share else None
        if started and "node" in state and state["node"] != node:  # (a state saved before states named it: not told)
            raise ValueError(f"{self.source.name}: this state_dict was taken from {_node_named(state['node'])}, where "
                             f"this stream is {_node_named(node)}: a state resumes the node it was taken from, else "
                             "rows would be skipped or read twice")
        position = state.get("position")
        return state["shard_idx"], tuple(position) if position is not None else None

    def __iter__(self) -> Iterator[tuple[Any, dict]]:
        first_shard, resume = self._start()
        if (self.num_proc and self.num_proc > 1 and len(self.shards) - first_shard > 1
                and not multiprocessing.current_process().daemon):
            yield from self._iter_parallel(first_shard, resume)
            return
        # A daemonic process (a DataLoader worker, a multiprocessing.Pool worker) cannot start worker processes:
        # it converts its shards itself, the same rows in the same order (its loader already divides the work).
        yield from self._shards_here(first_shard, resume, arrow=False)

    def _iter_arrow(self) -> Iterator[tuple[Any, Any]]:
        yield from self._shards_here(*self._start(), arrow=True)

    def _shards_here(self, first_shard: int, resume: Optional[tuple[int, int]], *, arrow: bool) -> Iterator:
        # Tables go out whole, each with the state after it, so their reads and skips are counted as they
        # are converted (a batch at a time: SkipsInOrder.batch_done); Python rows go out one by one, a few
        # converted ahead (see SkipsInOrder).
        skips = self._skips()
        converter = self._converter(skips)
        # A state past the last shard opens none: the last shard's file is checked alone, else its edits went unseen.
        if first_shard == len(self.shards) and first_shard - 1 in self._saved_versions:
            self._unchanged_since_saved(converter, first_shard - 1, skips, arrow=arrow)
        for shard_idx in range(first_shard, len(self.shards)):
            yield from self._converted_here(converter, shard_idx, resume if shard_idx == first_shard else None,
                                            arrow=arrow, skips=skips)

    def _converted_here(self, converter: ShardConverter, shard_idx: int, resume: Optional[tuple[int, int]], *,
                        arrow: bool = False, skips: Optional["SkipsInOrder"] = None) -> Iterator[tuple[Any, Any]]:
        """One shard converted in this process: its Python rows one by one, each with the state after it, or
        (``arrow``) its batches' tables, each with the state after the batch."""
        state = self._state_dict
        if skips is not None:
            skips.shard = shard_idx
        most_rows = None if arrow else piece_rows(self.source, handed_out=True)
        end = resume
        self._note_version(shard_idx)
        if shard_idx in self._saved_versions and not self._unchanged_since_saved(converter, shard_idx, skips,
                                                                                 arrow=arrow):
            self._shard_read(shard_idx, resume)
            return
        shard = self.shards[shard_idx]
        for batch_idx, batch in enumerate(converter.batches(self.split, shard, arrow=arrow,
                                                            resume=resume, most_rows=most_rows)):
            if arrow:
                table = batch.rows[self.config]
                if skips is not None:
                    skips.batch_done(batch.end[0], table.num_rows)
                    skips.note_share(state)
                if state:
                    state["position"] = batch.end
                end = batch.end
                if table.num_rows:
                    yield f"{shard_idx}_{batch_idx}", table
                continue
            yield from self._hand_out(shard_idx, batch.rows[self.config], batch.positions[self.config], skips)
            # rows skipped at the end of a batch are consumed too
            if skips is not None:
                skips.passed_all()
            if state:
                state["position"] = batch.end
            end = batch.end
        if skips is not None:  # a shard that could not be read at all: its one skip
            if arrow:
                skips.batch_done(None, 0)
            else:
                skips.passed_all()
        self._shard_read(shard_idx, end)

    def _unchanged_since_saved(self, converter: ShardConverter, shard_idx: int, skips: Optional["SkipsInOrder"], *,
                               arrow: bool) -> bool:
        """Whether shard ``shard_idx``'s file is still the version a loaded state was saved from; if not, its error
        is raised, or reported as its one skip: counted also where the report counted the rows around it (a layer
        above replays from a shard before the latest state's), as the run that saved the state met no such error."""
        unchanged = converter.check_version(self._shard_to_read(shard_idx))
        if skips is not None and not unchanged:  # reported: its one skip
            if arrow:
                skips.batch_done(None, 0, counted_before=False)
            else:
                skips.passed_all(counted_before=False)
        return unchanged

    def _note_version(self, shard_idx: int) -> None:
        """The state names the version of the file whose rows it is about to hand out (see _init_state_dict)."""
        if self._state_dict:
            self._state_dict["file_version"] = state_token(self.shards[shard_idx].version)

    def _shard_read(self, shard_idx: int, end: Optional[tuple[int, int]]) -> None:
        """The state once shard ``shard_idx`` is read to its end (``end``: the position after its last row,
        None if it gave none): the next shard's start; or, where it is the stream's last shard and a whole
        JSON Lines file, that end, so that a resume reads the rows appended to the file since (a state past the
        last shard never would, while one saved just after the last row, before the stream was asked for one
        more, did)."""
        state = self._state_dict
        if not state:
            return
        shard = self.shards[shard_idx]
        if end is not None and shard_idx == len(self.shards) - 1 and shard.stop is None and cut_at_lines(shard.file):
            state["shard_idx"], state["position"] = shard_idx, tuple(end)
        else:
            state["shard_idx"], state["position"] = shard_idx + 1, None

    def _hand_out(self, shard_idx: int, rows: list, positions: list,
                  skips: Optional["SkipsInOrder"]) -> Iterator[tuple[Any, dict]]:
        """Rows of one shard, the state following each row handed out, its reads and skips counted."""
        state = self._state_dict
        for row, position in zip(rows, positions):
            if skips is not None:
                skips.passing(position[0] - 1)
                skips.note_share(state)
            if state:
                state["shard_idx"], state["position"] = shard_idx, position
            yield (shard_idx, position[0] - 1), row  # the key: shard and row in its file

    def _iter_parallel(self, first_shard: int, resume: Optional[tuple[int, int]]) -> Iterator[tuple[Any, dict]]:
        """The first shard converted here (its first rows come as fast as without workers) while the next ones
        are converted ahead in worker processes of the platform's default start method (as datasets' own
        ``num_proc``; where it is spawn or forkserver, the usual ``if __name__ == "__main__":`` guard applies),
        handed out in order. Stopping early cancels the shards not started and does not wait for the others."""
        pool = concurrent.futures.ProcessPoolExecutor(self.num_proc, mp_context=multiprocessing.get_context(),
                                                      initializer=exit_with_parent)
        read_to_the_end = False
        try:
            pending: collections.deque = collections.deque()
            next_shard = first_shard + 1

            def submit():
                nonlocal next_shard
                pending.append((next_shard, pool.submit(
                    _convert_shard_rows, self.source, self.config, self.split, self._shard_to_read(next_shard),
                    self.on_error, self.row_check)))
                next_shard += 1

            with forking_workers():  # the first submit starts the workers
                while next_shard < len(self.shards) and len(pending) < self.num_proc + 1:
                    submit()
            skips = self._skips()
            yield from self._converted_here(self._converter(skips), first_shard, resume, skips=skips)
            while pending:
                shard_idx, future = pending.popleft()
                pieces, positions, errors, end = future.result()
                if next_shard < len(self.shards):
                    submit()
                if skips is not None:
                    skips.shard = shard_idx
                    skips.add_all(errors)
                self._note_version(shard_idx)
                done = 0
                for encoded in pieces:
                    # Rebuilt a piece at a time, just before its rows are handed out (see pipeline.PIECE_ROWS).
                    with gc_paused():
                        rows = loads_stored(encoded) if isinstance(encoded, bytes) else encoded
                    yield from self._hand_out(shard_idx, rows, positions[done:done + len(rows)], skips)
                    done += len(rows)
                if skips is not None:
                    skips.passed_all()
                self._shard_read(shard_idx, end)
            read_to_the_end = True
        finally:
            # Read to its end, every shard is converted: the workers only have to exit, so wait for them. A pool
            # left shutting down closes its wakeup pipe while the interpreter's exit hook may be writing to it
            # (concurrent.futures' race: "OSError: Bad file descriptor" printed after a command had finished).
            # Stopped early, the shards still converting are not waited for.
            pool.shutdown(wait=read_to_the_end, cancel_futures=True)


def _node_named(node: Optional[list]) -> str:
    """A stream's node, as a state names it (see _init_state_dict)."""
    if not node:
        return "a stream no nodes split row by row"
    nodes, rank = node
    return f"node {rank} of {nodes} (split_dataset_by_node)"


def _convert_shard_rows(source: Source, config: str, split: SplitPlan, shard: Shard, on_error: str,
                        row_check: Optional[Callable] = None
                        ) -> tuple[list, list, list[ToolUseDataError], Optional[tuple[int, int]]]:
    """One shard's rows, converted in a worker process, as pieces of exact JSON text (a string crosses the
    process boundary and one orjson call rebuilds a piece's rows: 2-3x cheaper than pickling them, and nothing
    but JSON values is in a row); the rows' positions and the errors of the rows skipped come back with them
    (counted as the consumer passes them: SkipsInOrder), and the position after its last row. Each piece is written as soon as it is converted, so
    the worker keeps text, not rows. A piece whose list of rows nests deeper than the JSON writers go (a
    stored leaf may use all their levels, and the list, the row and its columns add more) goes back pickled
    instead."""
    skipped = SkipsInOrder(None)
    converter = ShardConverter(source, [config], on_error=on_error, reports={config: skipped}, row_check=row_check)
    pieces: list = []
    positions: list = []
    end = None
    # Its rows go back when the whole shard is done: whole batches for a batch step (pipeline.piece_rows).
    for batch in converter.batches(split, shard, arrow=False, most_rows=piece_rows(source, handed_out=False)):
        rows = batch.rows[config]
        if rows:
            try:
                pieces.append(json_bytes(rows))  # the rows passed the storage checks: no NaN walk
            except JsonValueError:
                pieces.append(rows)
        positions += batch.positions[config]
        end = batch.end
    return pieces, positions, skipped.pending, end


class SkipsInOrder:
    """The converter's skip report while Python rows are handed out one by one. The converter reads a few
    rows ahead of the consumer (a piece at a time in this process, a whole shard in a worker), so rows read
    and skipped reach the user's ``report`` only as the consumer passes them: a report then never counts rows
    the consumer has not reached, and a stream stopped, saved and resumed with the same report counts every
    row once (rows read = rows handed out + rows skipped). Arrow tables go out a batch at a time: a batch's
    reads and skips are counted when its table does (``batch_done``).

    ``counted``: ``(shard, row)`` of a resumed stream, whose report counted every row of the shards before
    ``shard`` and the rows of ``shard`` numbered below ``row`` already; rows read again from an earlier state
    (a layer of datasets replaying from one) are not counted again. ``shard``: the shard being handed out.
    ``share``: the part of the rows this node counts, when nodes split the stream row by row (:mod:`.node_share`).
    ``listed_in``: a resumed stream's ``rows_path``, the files it reads and its epoch: a skipped row that file lists
    already in this epoch (read past the saved state by the run resumed), as often as each epoch up to this one lists
    it, is counted but not listed again."""

    def __init__(self, report: Optional[SkipReport], counted: Optional[tuple[int, int]] = None,
                 share: Optional[NodeShare] = None, listed_in: Optional[tuple[str, set[str], int]] = None):
        self.report = report
        self.share = share
        self.listed_in = listed_in
        self._listed: Optional[collections.Counter] = None  # read at the first skip
        self.pending: list[ToolUseDataError] = []  # in row order, as the converter meets them
        self.counted = counted
        self.shard = 0
        self.converted = 0  # rows the converter read (counted a batch at a time for Arrow tables)

    # -- what the converter calls ----------------------------------------------------------------------

    def add(self, error: ToolUseDataError, *, log: bool = True) -> None:
        # A stream converts to one config: every skip is its first, and logged (``log`` is always True).
        self.pending.append(error)

    def count_read(self, n: int) -> None:
        """Python rows are counted as they are passed instead (passing, passed_all); Arrow tables a batch at a
        time (batch_done)."""
        self.converted += n

    # -- what the hand-out calls -----------------------------------------------------------------------

    def add_all(self, errors: list[ToolUseDataError]) -> None:
        self.pending += errors

    def passing(self, row: int) -> None:
        """Row ``row`` of the file is handed out: the skips before it, then the row itself, have been read."""
        ours = self.share is None or self.share.keeps_next()
        pending = self.pending
        if pending and pending[0].row is not None and pending[0].row < row:
            passed = 1
            while passed < len(pending) and pending[passed].row is not None and pending[passed].row < row:
                passed += 1
            if ours:
                self._skipped(pending[:passed])
            del pending[:passed]
        if self.share is not None:
            self.share.hand_out()
        if ours and self._fresh(row):
            self.report.count_read(1)

    def passed_all(self, counted_before: bool = True) -> None:
        """The consumer is past every row converted so far (the end of a batch or a shard). ``counted_before``:
        False for an error the run that saved the loaded state did not meet, counted whatever it counted."""
        if self.pending:
            if self.share is None or self.share.keeps_next():
                self._skipped(self.pending, counted_before)
            self.pending = []

    def batch_done(self, end_row: Optional[int], rows_out: int, counted_before: bool = True) -> None:
        """An Arrow batch of the shard goes out, ``rows_out`` rows ending before row ``end_row`` (None: a shard
        that could not be read, its one error): its reads and skips are counted, unless a resumed stream counted
        them. A node's share is the rows of the table it keeps, and the batch's other reads (its skips) if it
        keeps the table's first row. ``counted_before``: as for :meth:`passed_all`."""
        read, errors = self.converted, self.pending
        if self.share is not None:
            ours = self.share.keeps_next()
            read = self.share.hand_out(rows_out) + (self.converted - rows_out if ours else 0)
            errors = errors if ours else []
        if not counted_before or self._fresh(end_row - 1 if end_row is not None else None):
            self.report.count_read(read)
            for error in errors:
                self._add(error)
        self.converted, self.pending = 0, []

    def note_share(self, state: Optional[dict]) -> None:
        """Keep the node's place among the rows handed out in the stream's state, so a resume goes on from it."""
        if state and self.share is not None:
            state["node_rows"] = self.share.handed

    def _fresh(self, row: Optional[int]) -> bool:
        """Whether row ``row`` of the current shard (None: the shard's whole-file error) is not counted yet."""
        if self.counted is None:
            return True
        shard, first = self.counted
        if self.shard != shard:
            return self.shard > shard
        return row is None or row >= first

    def _skipped(self, errors: list[ToolUseDataError], counted_before: bool = True) -> None:
        errors = [error for error in errors if not counted_before or self._fresh(error.row)]
        self.report.count_read(len(errors))
        for error in errors:
            self._add(error)

    def _add(self, error: ToolUseDataError) -> None:
        if self.listed_in is not None and self._listed is None:
            self._listed = listed_skipped_rows(*self.listed_in[:2])
        if self._listed is not None and self._listed[error.file, error.row] > self.listed_in[2]:
            self.report.add(error, listed=True)
        else:  # (a report of the caller's own kind may not know ``listed``: only a resumed stream passes it)
            self.report.add(error)


def _install_take_that_stops_at_n() -> None:
    """datasets' ``take(n)`` asks its stream for one more row after the n-th before it stops: a stream of ours
    converts that row and counts it (and the skips before it) in the report, which then said n + 1 rows read
    for n handed out. ``take`` here stops right after its n-th row, as a loop that breaks there does; the rows
    and the take's state are datasets' own (this is its method, cut off after n rows), and the stream's state
    is the position after the n-th row instead of one row further. Installed once per process on import."""
    from datasets.iterable_dataset import TakeExamplesIterable

    original = TakeExamplesIterable.__iter__

    def __iter__(self):
        taken = self._state_dict["taken"] if self._state_dict else 0
        yield from itertools.islice(original(self), max(self.n - taken, 0))

    TakeExamplesIterable.__iter__ = patched_once(original, __iter__, "_stops_at_n")


def _install_epochs_known_to_streams() -> None:
    """Each stream of ours that a pass reads is told the epoch of the ``IterableDataset`` it is read through
    (``set_epoch``, or a loaded state's), which datasets keeps to itself. Installed once per process on import."""
    from datasets.iterable_dataset import IterableDataset

    prepare = IterableDataset._prepare_ex_iterable_for_iteration

    def prepared(self, *args, **kwargs):
        out = prepare(self, *args, **kwargs)
        steps = [out]
        while steps:
            step = steps.pop()
            if isinstance(step, ShardExamplesIterable):
                step.epoch = self.epoch
                continue
            steps.extend(getattr(step, "ex_iterables", None) or ())
            if getattr(step, "ex_iterable", None) is not None:
                steps.append(step.ex_iterable)
        return out

    IterableDataset._prepare_ex_iterable_for_iteration = patched_once(prepare, prepared, "_tells_streams_the_epoch")


_install_take_that_stops_at_n()
_install_epochs_known_to_streams()
share_skips_among_nodes()
warn_of_lost_shuffle_buffers()
check_saved_states()  # wraps the warning's patch: what is no stream's state is refused before any warning
resume_in_each_workers_part()
