"""The repo's own text files as publish reads them: a card saved by an editor that writes a byte order mark, and
a card or manifest that is not UTF-8 at all."""
from __future__ import annotations

from pathlib import Path

import pytest
from huggingface_hub import DatasetCard

from tooluse_datasets.dataset_card import BEGIN_MARKER, END_MARKER
from tooluse_datasets.publish import publish_mirror

from fake_hub import FakeHubApi
from mirror_support import quiet as _quiet

REPO = "acme/nestful-tooluse"


@pytest.fixture(scope="module")
def mirror(nestful_mirror) -> Path:
    return nestful_mirror


def _published_then_edited(mirror: Path, edit) -> FakeHubApi:
    """The mirror published, then its card edited on the Hub: ``edit(card text) -> README bytes``."""
    api = FakeHubApi()
    publish_mirror(mirror, REPO, api=api, echo=_quiet)
    card = api.files(REPO)["README.md"].decode()
    api.edit(REPO, {"README.md": edit(card)})
    return api


def _with_user_text(card: str) -> str:
    """The card with a metadata key and sections of the user's own, as written on the Hub."""
    card = card.replace("\nlicense: ", "\nteam: search-infra\nlicense: ", 1)
    card = card.replace(BEGIN_MARKER, "## Why we mirror this\n\nWritten on the Hub.\n\n" + BEGIN_MARKER, 1)
    return card + "\n## Contact\n\nAsk the search team.\n"


def test_a_card_saved_with_a_byte_order_mark_keeps_the_users_metadata_and_gains_no_second_yaml_block(mirror):
    # It was read as text: the front matter went unseen, so the user's metadata was dropped and the old YAML
    # block (byte order mark and all) was kept in the body as if it were the user's prose, on every publish.
    api = _published_then_edited(mirror, lambda card: b"\xef\xbb\xbf" + _with_user_text(card).encode())
    lines: list[str] = []
    assert publish_mirror(mirror, REPO, api=api, echo=lines.append).committed
    published = api.files(REPO)["README.md"].decode()
    assert not published.startswith("\ufeff") and "\ufeff" not in published
    assert DatasetCard(published).data["team"] == "search-infra"
    assert published.count("\n---\n") == 1 and published.count(BEGIN_MARKER) == 1
    assert published.index("## Why we mirror this") < published.index(BEGIN_MARKER) \
        < published.index(END_MARKER) < published.index("## Contact")
    assert not any("cannot be read" in line for line in lines)
    assert not publish_mirror(mirror, REPO, api=api, echo=_quiet).committed


def test_a_card_that_is_not_utf8_is_refused_naming_it_and_the_byte(mirror, capsys):
    # It failed with a bare UnicodeDecodeError naming neither the repo nor the file.
    from test_publish import _cli

    # the user's text saved as Latin-1 by their editor: "Café" is b"Caf\xe9"
    api = _published_then_edited(mirror, lambda card: _with_user_text(card).encode() + "Café\n".encode("latin-1"))
    head = api.commits(REPO)[-1].sha
    assert _cli([str(mirror), "--repo-id", REPO], api) == 2
    err = capsys.readouterr().err
    first_bad_byte = api.files(REPO)["README.md"].rindex(b"Caf") + 3
    assert f"the README.md in {REPO} is not UTF-8" in err and f"byte {first_bad_byte}" in err
    assert "save it as UTF-8" in err and "UnicodeDecodeError" not in err and "a bug" not in err
    assert api.commits(REPO)[-1].sha == head


def test_a_manifest_in_the_repo_that_is_not_utf8_only_costs_the_list_of_previous_files(mirror, caplog):
    # As any damaged manifest in the repo (README): it stopped the publish with a bare UnicodeDecodeError.
    from tooluse_datasets.mirror import MANIFEST_NAME

    api = FakeHubApi()
    publish_mirror(mirror, REPO, api=api, echo=_quiet)
    api.edit(REPO, {MANIFEST_NAME: b"\xff\xfe{}"})
    result = publish_mirror(mirror, REPO, api=api, replace_foreign=True, echo=_quiet)
    assert result.committed and api.files(REPO)[MANIFEST_NAME] == (mirror / MANIFEST_NAME).read_bytes()
    assert any(MANIFEST_NAME in r.getMessage() and "ignoring" in r.getMessage() for r in caplog.records)
