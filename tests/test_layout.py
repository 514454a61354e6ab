"""The test tree reads by behaviour: every test file sits in the folder of what it tests (one per
package, plus the cross-cutting ones) and is named after the behaviour it checks, never after
when or how it was written (a review, a session, a round of hardening, a fix, a second try)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

TESTS = Path(__file__).parent

FOLDERS = {
    "jetstream": "the JetStream client: connections, publishing, consuming, the wire",
    "kvstore": "KV buckets",
    "objstore": "object stores",
    "pcgroups": "consumer groups and watch groups",
    "cli": "the jetstore command",
    "spark": "the natskv / natsobj Spark sources",
    "security": "hostile peers, inputs and secrets, across packages",
    "faults": "3-node clusters under kill -9, SIGSTOP and partitions",
    "model": "random histories checked against a model",
    "docs": "snippets of README.md and docs/, the examples and the benchmark commands",
    "release": "the public surface and the packaged release",
}

# Words that say when or how a test was written, not what it checks.
HISTORY_WORDS = {
    "review", "reviews", "reviewed", "break", "breaks", "hardening", "hardened", "round",
    "session", "fix", "fixes", "fixed", "bug", "bugs", "issue", "issues", "finding", "findings",
    "helper", "new", "old", "misc", "extra", "extras", "more", "followup", "wip",
    "todo", "tmp", "temp", "regression", "regressions",
}  # fmt: skip
# A session, version, round, issue, ... number: s10, v2, r3, issue31, helper40, pr12.
NUMBERED = re.compile(r"^(s|v|r|round|session|issue|helper|finding|pr|part|step|phase)\d+$")


def history_in(stem: str) -> list[str]:
    """What in a test file's name (without ``.py``) records its history rather than its subject."""
    words = stem.removeprefix("test_").split("_")
    found = [w for w in words if w in HISTORY_WORDS or NUMBERED.match(w) or w.isdigit()]
    if re.search(r"\d$", stem):
        found.append("a number at the end (a second or third try)")
    return found


def _test_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("test_*.py") if "__pycache__" not in p.parts)


@pytest.mark.parametrize(
    "name",
    [
        "test_s10_review",
        "test_spark_breaks2",
        "test_hardening_conn",
        "test_enc_breaks_s10",
        "test_review_obj",
        "test_session9_breaks",
        "test_kv_round3",
        "test_fix_watch",
        "test_issue31_layout",
        "test_watch_v2",
        "test_misc",
        "test_more_watch_tests",
        "test_watch_2",
    ],
)
def test_names_that_record_history_are_refused(name: str) -> None:
    assert history_in(name), name


@pytest.mark.parametrize(
    "name",
    ["test_adr37_pull", "test_text_utf8_cannot_carry", "test_kv_revision_range", "test_names"],
)
def test_names_after_a_behaviour_are_taken(name: str) -> None:
    assert history_in(name) == []


def test_every_test_file_is_named_after_what_it_tests() -> None:
    bad = {str(p.relative_to(TESTS)): history_in(p.stem) for p in _test_files()}
    assert {path: words for path, words in bad.items() if words} == {}


def test_every_test_file_is_in_an_agreed_folder() -> None:
    """Directly inside one of FOLDERS (tests/test_layout.py, this file, is the one exception)."""
    misplaced = [
        str(p.relative_to(TESTS))
        for p in _test_files()
        if p != Path(__file__) and not (p.parent.parent == TESTS and p.parent.name in FOLDERS)
    ]
    assert misplaced == []


def test_every_folder_is_a_package() -> None:
    """Test modules of one basename may live in two folders (``security/test_names.py`` beside
    ``jetstream/test_names.py``) only if each folder is a package."""
    folders = {p.parent for p in _test_files()} | {TESTS}
    assert [str(f) for f in folders if not (f / "__init__.py").exists()] == []
