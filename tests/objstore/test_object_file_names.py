"""An object name becomes a local file name only if it stays inside the directory and a
listing of that directory shows it as it is (``objstore.local_path``): any peer may store any
name."""

from __future__ import annotations

from pathlib import Path

import pytest

import jetstream
import objstore


@pytest.mark.parametrize(
    "name", ["../evil", "/etc/passwd", "a/../../b", "a//b", "./a", "a\\..\\b", "", "a/", "a\0b"]
)
def test_object_names_that_would_leave_the_directory_are_refused(name: str, tmp_path: Path) -> None:
    with pytest.raises(objstore.PathNotAllowedError, match="not a safe relative path"):
        objstore.local_path(tmp_path, name)


@pytest.mark.parametrize(
    "name",
    [
        "title\x1b]0;pwned\x07",  # sets the terminal's title when listed
        "new\nline",  # a second line in `ls`
        "tab\there",
        "cr\rx",
        "del\x7f",
        "c1\x9b2J",
        "invoice\u202efdp.exe",  # shows as "invoiceexe.pdf"
        "zero\u200bwidth",
        "nbsp\u00a0",
        "dir/sep\u2028line",
        "lone\udcff",  # not even encodable as a file name
    ],
)
def test_names_a_listing_would_not_show_as_they_are_are_refused(name: str, tmp_path: Path) -> None:
    with pytest.raises(objstore.PathNotAllowedError) as caught:
        objstore.local_path(tmp_path, name)
    assert isinstance(caught.value, jetstream.ClientValidationError)
    assert str(caught.value).isprintable(), "the message quotes the name escaped"


@pytest.mark.parametrize(
    ("name", "parts"),
    [
        ("logs/2026/a.txt", ("logs", "2026", "a.txt")),
        ("été/naïve café.txt", ("été", "naïve café.txt")),
        ("日本語.txt", ("日本語.txt",)),
        ("weird[/x].txt", ("weird[", "x].txt")),
        (":smile: $(rm -rf) 'q'", (":smile: $(rm -rf) 'q'",)),
    ],
)
def test_printable_names_keep_their_path(name: str, parts: tuple[str, ...], tmp_path: Path) -> None:
    assert objstore.local_path(tmp_path, name) == tmp_path.joinpath(*parts)
    assert objstore.local_path(str(tmp_path), name) == tmp_path.joinpath(*parts)
