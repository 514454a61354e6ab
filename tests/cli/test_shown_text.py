"""Server text in the CLI's output: escaped so that nothing in it drives a terminal or breaks
a line (plain output), and valid, exact JSON holding nothing raw a terminal acts on."""

from __future__ import annotations

import json
import logging
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

import jetstream
from jetstore._cg_fields import group_lines
from jetstore._output import _LogLine, error_line, report_error, show_fields
from jetstore._shown import json_text, shown, shown_value

ANY_TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=40)


@pytest.mark.parametrize(
    "text",
    ["plain", "été naïve 日本語 🎉", "C:\\temp\\x1b", "[bold]x[/bold] :smile: $(id)", "", " "],
)
def test_printable_text_is_shown_as_it_is(text: str) -> None:
    """A backslash stays: ordinary text reads as stored (`--json` is exact)."""
    assert shown(text) == text


@pytest.mark.parametrize(
    ("text", "escaped"),
    [
        ("\x1b]0;pwned\x07", "\\x1b]0;pwned\\x07"),  # sets the window title
        ("\x1b[2J", "\\x1b[2J"),  # clears the screen
        ("a\nb\rc\td", "a\\nb\\rc\\td"),  # forged rows and columns
        ("\x00\x7f", "\\x00\\x7f"),
        ("\x9b2J\x85", "\\x9b2J\\x85"),  # C1: an 8-bit CSI, NEL
        ("\u202eevil\u2066\u200f\u061c", "\\u202eevil\\u2066\\u200f\\u061c"),  # bidi
        ("zero\u200bwidth\ufeff", "zero\\u200bwidth\\ufeff"),
        ("line\u2028para\u2029", "line\\u2028para\\u2029"),
        ("nbsp\u00a0", "nbsp\\xa0"),
        ("tag\U000e0001", "tag\\U000e0001"),
        ("\ue000private", "\\ue000private"),
        ("byte\udcff", "byte\\xff"),  # not UTF-8, decoded with surrogateescape
        ("lone\ud800", "lone\\ud800"),
    ],
)
def test_what_drives_a_terminal_is_escaped(text: str, escaped: str) -> None:
    assert shown(text) == escaped


@given(ANY_TEXT)
def test_shown_text_is_printable_and_shown_once(text: str) -> None:
    once = shown(text)
    assert once.isprintable()
    assert shown(once) == once


def test_lines_keep_newlines_and_tabs_only() -> None:
    assert shown("a\nb\tc\rd\x1b", lines=True) == "a\nb\tc\\rd\\x1b"


def test_values_are_text_escaped_or_their_size() -> None:
    assert shown_value(b"ok \x1b[2J") == "ok \\x1b[2J"
    assert shown_value(b"\xff\xfe") == "<2 bytes>"
    assert shown_value(b"x" * 100, limit=10) == "x" * 9 + "…"


@given(st.dictionaries(ANY_TEXT, ANY_TEXT | st.lists(ANY_TEXT, max_size=3), max_size=4))
def test_json_is_valid_exact_and_holds_nothing_raw(document: object) -> None:
    for indent in (None, 2):
        text = json_text(document, indent=indent)
        assert all(ch.isprintable() or ch == "\n" for ch in text)
        assert json.loads(text) == document


def test_json_keeps_printable_text_readable() -> None:
    document = {"name": "été 🎉", "bidi": "\u202e", "astral": "\U000e0001", "del": "\x7f"}
    assert json_text(document) == (
        '{"name":"été 🎉","bidi":"\\u202e","astral":"\\udb40\\udc01","del":"\\u007f"}'
    )
    assert json_text([1], indent=2) == "[\n  1\n]"


def test_error_lines_and_debug_tracebacks_show_server_text_escaped(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """An error's message may quote what the server or a peer wrote."""
    error = jetstream.JetStreamError("stream 'x' says \x1b]0;pwned\x07\nforged line")
    assert error_line(error) == (
        "jetstore: error: JetStreamError: stream 'x' says \\x1b]0;pwned\\x07 forged line"
    )
    missing = FileNotFoundError(2, "No such file", "dir/evil\x1b[2J")
    assert error_line(missing) == "jetstore: error: No such file: dir/evil\\x1b[2J"
    try:
        raise error
    except jetstream.JetStreamError as raised:
        report_error(raised, debug=True)
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "\\x1b]0;pwned\\x07\nforged" in err
    assert all(ch.isprintable() or ch == "\n" for ch in err)


def test_log_lines_show_server_text_escaped() -> None:
    formatter = _LogLine("jetstore: %(levelname)s: %(message)s", debug=True)  # as --debug
    warning = logging.LogRecord(
        "kvstore", logging.WARNING, __file__, 1, "skipped %s", ("KV_\x1b]0;pwned\x07\nx",), None
    )
    assert formatter.format(warning) == "jetstore: warning: skipped KV_\\x1b]0;pwned\\x07\\nx"
    try:
        raise ValueError("\x9b2J")
    except ValueError:
        failed = logging.LogRecord(
            "jetstream", logging.ERROR, __file__, 1, "failed: \u202e", (), sys.exc_info()
        )
    text = formatter.format(failed)
    assert text.startswith("jetstore: error: failed: \\u202e\nTraceback")
    assert text.endswith("ValueError: \\x9b2J")
    assert all(ch.isprintable() or ch == "\n" for ch in text)
    one_line = _LogLine("jetstore: %(levelname)s: %(message)s", debug=False).format(failed)
    assert one_line == "jetstore: error: failed: \\u202e (ValueError: \\x9b2J)"


def test_info_and_group_lines_show_server_text_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    """`kv info`, `obj info` and the `cg` documents: descriptions, metadata, member names and
    filters a peer wrote."""
    show_fields(
        {"description": "a\nforged: row", "metadata": {"k\x1b": "v\u202e"}, "sealed": False},
        json=False,
        quiet=False,
    )
    assert capsys.readouterr().out == (
        "description: a\\nforged: row\nmetadata: k\\x1b=v\\u202e\nsealed: false\n"
    )
    fields = {"members": ["m\x1b]0;x\x07", "n"], "partitions": {"m\n": [0, 1]}}
    assert group_lines(fields) == ["members: m\\x1b]0;x\\x07, n", "partitions: m\\n:0,1"]
