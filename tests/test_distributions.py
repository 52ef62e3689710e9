"""``stats --plots``: distributions counted in the statistics pass and drawn as reproducible PNG files."""
from __future__ import annotations

import json
from collections import Counter

import pytest

import tooluse_datasets as td
from tooluse_datasets.cli import main
from tooluse_datasets.distributions import MEASURES, Distributions, plot_distributions
from tooluse_datasets.stats import SplitStatistics


def test_distributions_count_what_the_rows_hold():
    splits = td.load("toolmind", data_files=td.sample_files("toolmind"), streaming=True)
    for split, ds in splits.items():
        rows = list(ds)
        statistics, dist = SplitStatistics(), Distributions()
        for row in rows:
            statistics.add(row)  # how stats and mirrors fill them (one walk with the other statistics)
            dist.add(row)        # on their own
        # Each measure is the multiset of its values over the rows (or, for content length, the messages).
        assert statistics.distributions.counts == dist.counts == {
            "turns": Counter(len(r["messages"]) for r in rows),
            "calls_per_row": Counter(sum(len(m.get("tool_calls", [])) for m in r["messages"]) for r in rows),
            "tools_per_row": Counter(len(r.get("tools") or []) for r in rows),
            "content_chars": Counter(len(m["content"]) + len(m.get("reasoning_content", ""))
                                     for r in rows for m in r["messages"]),
        }
        again = Distributions.from_state(dist.to_state())
        assert again.counts == dist.counts
        assert Distributions().merge(dist).merge(dist).counts == {name: c + c for name, c in dist.counts.items()}


def test_stats_writes_one_png_per_measure_reproducibly(tmp_path, capsys):
    pytest.importorskip("matplotlib", reason="plots need the plots extra: pip install -e '.[plots]'")
    first, second = tmp_path / "a", tmp_path / "b"
    assert main(["stats", "toolmind", "--sample", "--plots", str(first)]) == 0
    captured = capsys.readouterr()
    assert main(["stats", "toolmind", "--sample", "--plots", str(second)]) == 0
    # the files written are said on standard error: the output is the statistics' JSON alone, as without --plots
    assert f"plot: {first / 'turns.png'}" in captured.err
    assert set(json.loads(captured.out)) == set(td.load("toolmind", data_files=td.sample_files("toolmind"),
                                                        streaming=True))
    for file_name, _, _ in MEASURES.values():
        data = (first / file_name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
        assert data == (second / file_name).read_bytes()  # no timestamp: mirrors stay byte-reproducible


def test_plot_function_takes_the_accumulators_of_any_splits(tmp_path, cache_dir):
    pytest.importorskip("matplotlib", reason="plots need the plots extra: pip install -e '.[plots]'")
    dist = Distributions()
    for row in td.load("nestful", data_files=td.sample_files("nestful"), split="train", cache_dir=cache_dir):
        dist.add(row)
    written = plot_distributions({"train": dist, "empty": Distributions()}, tmp_path / "plots", title="nestful")
    assert [p.name for p in written] == [name for name, _, _ in MEASURES.values()]


def test_a_plot_cut_off_while_saved_leaves_no_picture_under_its_name(tmp_path, monkeypatch):
    """The PNGs were saved straight to their final names: a save that failed midway (a full disk, Ctrl-C) left a
    truncated picture there, which a mirror card would embed."""
    pytest.importorskip("matplotlib", reason="plots need the plots extra: pip install -e '.[plots]'")
    from matplotlib.figure import Figure

    saved = Figure.savefig

    def cut_off(self, fname, **kwargs):
        saved(self, fname, **kwargs)
        with open(fname, "r+b") as f:
            f.truncate(100)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Figure, "savefig", cut_off)
    dist = Distributions()
    dist.add(next(iter(td.load("nestful", data_files=td.sample_files("nestful"), split="train", streaming=True))))
    with pytest.raises(OSError, match="No space left"):
        plot_distributions({"train": dist}, tmp_path / "plots")
    assert list((tmp_path / "plots").iterdir()) == []


def test_the_log_scaled_plot_says_how_many_messages_are_empty(tmp_path, monkeypatch):
    """Content length is drawn on a log scale, which has no place for 0: call turns (no content) would vanish
    from the plot while still counting in its shares, so their number is in the legend."""
    pytest.importorskip("matplotlib", reason="plots need the plots extra: pip install -e '.[plots]'")
    from matplotlib.axes import Axes

    labels: list[str] = []
    original = Axes.hist
    monkeypatch.setattr(Axes, "hist", lambda self, *a, **kw: labels.append(kw["label"]) or original(self, *a, **kw))
    dist = Distributions()
    for row in td.load("nestful", data_files=td.sample_files("nestful"), split="train", streaming=True):
        dist.add(row)
    empty = dist.counts["content_chars"][0]
    assert empty > 0
    plot_distributions({"train": dist}, tmp_path)
    assert labels[-1] == f"train (n={sum(dist.counts['content_chars'].values()):,}, {empty:,} empty)"
    assert all("empty" not in label for label in labels[:-1])  # the other measures have a linear axis


def test_splits_share_their_bins_when_values_span_more_than_40(tmp_path, monkeypatch):
    """Beyond 40 distinct values the bins were `40`: each split got 40 bins over its own range, so the bars of
    two splits did not line up (the shares were of bins of different widths)."""
    matplotlib = pytest.importorskip("matplotlib", reason="plots need the plots extra: pip install -e '.[plots]'")
    matplotlib.use("Agg")
    from matplotlib.axes import Axes

    wide, narrow = Distributions(), Distributions()
    wide.counts["turns"] = Counter({2: 5, 100: 1})
    narrow.counts["turns"] = Counter({50: 3, 60: 2})
    edges: dict[str, list] = {}
    hist = Axes.hist

    def spy(self, x, bins=None, **kw):
        counts, bin_edges, patches = hist(self, x, bins=bins, **kw)
        if "n=" in kw.get("label", "") and not edges.get(kw["label"]):
            edges[kw["label"]] = list(bin_edges)
        return counts, bin_edges, patches

    monkeypatch.setattr(Axes, "hist", spy)
    plot_distributions({"wide": wide, "narrow": narrow}, tmp_path)
    turns = {label.split()[0]: e for label, e in edges.items()}
    assert turns["wide"] == turns["narrow"] and turns["wide"][0] <= 2 and turns["wide"][-1] >= 100


def test_plots_without_matplotlib_are_refused_up_front_in_one_line(tmp_path, capsys, monkeypatch):
    """Without the plots extra, `stats --plots` read every row, printed the statistics, then ended with
    'unexpected ModuleNotFoundError ... (a bug ...)'."""
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert main(["stats", "ms_swift", "--sample", "--plots", str(tmp_path / "plots")]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == ("error: ValueError: --plots draws with matplotlib, which is not installed: pip install "
                            "'tooluse-datasets[plots]'\n")
    assert not (tmp_path / "plots").exists()


def test_a_plots_folder_that_cannot_be_made_stops_stats_before_the_pass(tmp_path, capsys, monkeypatch):
    """A --plots path that is a file was found only when drawing, after every row was read and the statistics
    printed: the run failed (exit 2) having printed what looked like its result. The folder is made first now."""
    pytest.importorskip("matplotlib", reason="plots need the plots extra: pip install -e '.[plots]'")
    taken = tmp_path / "plots"
    taken.write_text("a file, not a folder\n")
    counted = []
    monkeypatch.setattr(SplitStatistics, "add", lambda self, row: counted.append(row))
    assert main(["stats", "ms_swift", "--sample", "--plots", str(taken)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and not counted  # no row passed, no statistics printed
    assert captured.err.startswith("error: ValueError: --plots ") and str(taken) in captured.err
    assert taken.read_text() == "a file, not a folder\n"
