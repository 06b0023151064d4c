"""The file steps of issue 28 on a real filesystem: names a sender chose, a workspace an agent
prepared with links to get the supervisor (root) to write or read elsewhere, and grades."""

from __future__ import annotations

import os

import pytest

from supervisor.api.files import read_workspace_file, safe_name, store_attachment
from supervisor.api.results import grade_of
from supervisor.errors import FileRefused, InvalidRequest


@pytest.mark.parametrize(("sent", "kind", "stored"), [
    ("report.pdf", "document", "report.pdf"),
    ("screen shot (1).png", "document", "screen_shot_1_.png"),
    (".env", "document", "env"),
    ("", "photo", "photo.jpg"),
    ("", "document", "file"),
    ("ｆｕｌｌｗｉｄｔｈ.txt", "document", "fullwidth.txt"),
    ("a" * 300 + ".tar.gz", "document", "a" * 117 + ".gz"),
    ("naïve résumé.md", "document", "na_ve_r_sum_.md"),
])
def test_a_sent_name_becomes_a_plain_one(sent: str, kind: str, stored: str) -> None:
    assert safe_name(sent, kind) == stored


@pytest.mark.parametrize("sent", ["../x", "a/b", "a\\b", "..", ".", "..hidden", "x\x00y",
                                  "line\nbreak", "／etc／passwd"])
def test_a_name_that_is_a_path_is_refused_not_repaired(sent: str) -> None:
    with pytest.raises(FileRefused, match="is a path, not a name"):
        safe_name(sent, "document")


def test_never_overwrites_and_never_follows_a_planted_link(tmp_path) -> None:
    work, outside = tmp_path / "w", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    assert store_attachment(work, "a.txt", b"one") == "attachments/a.txt"
    assert store_attachment(work, "a.txt", b"two") == "attachments/a-1.txt"
    assert store_attachment(work, "noext", b"3") == "attachments/noext"
    assert store_attachment(work, "noext", b"4") == "attachments/noext-1"
    assert (work / "attachments" / "a.txt").read_bytes() == b"one"
    # The agent replaces a name with a link to a file outside: a new name, the target intact.
    target = outside / "victim"
    target.write_bytes(b"keep")
    (work / "attachments" / "b.txt").symlink_to(target)
    assert store_attachment(work, "b.txt", b"evil") == "attachments/b-1.txt"
    assert target.read_bytes() == b"keep"
    # ... or the whole directory with a link: refused, nothing written anywhere.
    other = tmp_path / "w2"
    other.mkdir()
    (other / "attachments").symlink_to(outside)
    with pytest.raises(FileRefused, match="not a directory"):
        store_attachment(other, "c.txt", b"evil")
    assert sorted(p.name for p in outside.iterdir()) == ["victim"]


def test_reading_stays_inside_the_workspace(tmp_path) -> None:
    work = tmp_path / "w"
    (work / "d").mkdir(parents=True)
    (work / "d" / "f.txt").write_bytes(b"inside")
    (tmp_path / "secret").write_bytes(b"outside")
    os.symlink(tmp_path / "secret", work / "leak")
    os.symlink(tmp_path, work / "up")
    os.symlink("d", work / "alias")
    assert read_workspace_file(work, "d/f.txt", 100, "s") == ("f.txt", b"inside")
    assert read_workspace_file(work, f"{work}/d/f.txt", 100, "s") == ("f.txt", b"inside")
    for path, why in [("leak", "symbolic link"), ("up/secret", "symbolic link"),
                      ("alias/f.txt", "symbolic link"), ("../secret", "'..'"),
                      (str(tmp_path / "secret"), "outside"), ("d", "not a regular file"),
                      ("nope", "There is no file"), ("", "not a file inside")]:
        with pytest.raises(FileRefused, match=why):
            read_workspace_file(work, path, 100, "s")
    with pytest.raises(FileRefused, match="too big"):
        read_workspace_file(work, "d/f.txt", 3, "send_file_max_bytes")


@pytest.mark.parametrize(("given", "grade"), [(85, 85), ("85%", 85), (" 40 ", 40), (0, 0),
                                             (100, 100), (99.6, 100), ("12.4", 12)])
def test_a_grade_is_a_whole_0_to_100(given: object, grade: int) -> None:
    assert grade_of(given) == grade


@pytest.mark.parametrize("given", [True, -1, 101, "high", None, "nan%"])
def test_a_bad_grade_is_refused_with_what_was_wrong(given: object) -> None:
    with pytest.raises(InvalidRequest, match="confidence"):
        grade_of(given)
