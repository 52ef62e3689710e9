"""Publishing edge cases: a card on the Hub whose generated-section markers were damaged, and a mirror built
from part of the data (--split, --configs) published over a repo that holds the rest."""
from __future__ import annotations

from pathlib import Path

import pytest

from tooluse_datasets.dataset_card import BEGIN_MARKER, END_MARKER, merge_cards, render_card
from tooluse_datasets.mirror import MirrorError, read_manifest
from tooluse_datasets.publish import PublishError, publish_mirror

from fake_hub import FakeHubApi
from mirror_support import build_sample_mirror
from mirror_support import quiet as _quiet
from test_publish import _cli

REPO = "acme/nestful-tooluse"


@pytest.fixture(scope="module")
def mirror(nestful_mirror) -> Path:
    return nestful_mirror


# -- a card whose generated-section markers do not enclose one section -------------------------------------------


def _published_card_edited(mirror: Path, edit) -> tuple[FakeHubApi, str]:
    api = FakeHubApi()
    publish_mirror(build_sample_mirror("nestful", mirror.parent / "only-unified", configs=["unified"]), REPO,
                   api=api, echo=_quiet)
    card = edit(api.files(REPO)["README.md"].decode())
    api.edit(REPO, {"README.md": card.encode()})
    return api, card


def test_a_card_that_lost_its_end_marker_is_refused_instead_of_keeping_a_stale_generated_section(mirror, capsys):
    # Editing the card on the Hub, the user added a section and deleted the END marker line. The merge used to
    # keep the whole old text below the new section: the stale generated section (saying the repo has only
    # `unified`) stayed in the card, and stayed on every later publish.
    api, edited = _published_card_edited(
        mirror, lambda card: card.replace(END_MARKER + "\n", "") + "\n## Our notes\n\nmine\n")
    head = api.commits(REPO)[-1].sha
    with pytest.raises(PublishError, match=r"start marker of the generated section \(line \d+\) but not its end"):
        publish_mirror(mirror, REPO, api=api, echo=_quiet)
    assert _cli([str(mirror), "--repo-id", REPO, "--dry-run"], api) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and f"{REPO}: the README.md in the repo" in err and END_MARKER in err
    assert api.commits(REPO)[-1].sha == head
    # put back, the card publishes with one generated section and the user's text
    api.edit(REPO, {"README.md": edited.replace("\n## Our notes", f"{END_MARKER}\n\n## Our notes").encode()})
    assert publish_mirror(mirror, REPO, api=api, echo=_quiet).committed
    card = api.files(REPO)["README.md"].decode()
    assert card.count(BEGIN_MARKER) == card.count(END_MARKER) == card.count("## Configurations") == 1
    assert "| `raw` |" in card and card.index(END_MARKER) < card.index("## Our notes\n\nmine")


@pytest.mark.parametrize("damage, message", [
    (lambda c: c.replace(BEGIN_MARKER + "\n", ""), "end marker of the generated section .* not its start"),
    (lambda c: c.replace(BEGIN_MARKER, "@@").replace(END_MARKER, BEGIN_MARKER).replace("@@", END_MARKER),
     "end marker of the generated section .* before its start marker"),
    # what the old merge left after a publish over a card without END marker: a stale second section
    (lambda c: c + "\n" + c[c.index(BEGIN_MARKER):c.index(END_MARKER)], "2 start markers .* and 1 end markers"),
])
def test_damaged_generated_section_markers_are_refused_naming_the_fix(mirror, damage, message):
    generated = render_card(read_manifest(mirror), REPO)
    with pytest.raises(MirrorError, match=message):
        merge_cards(generated, damage(generated))
    assert merge_cards(generated, "# no markers at all\n").count(BEGIN_MARKER) == 1
