"""No repr shows a value's bytes: entries, typed entries, stored messages and upload items say
how large the value is and what it belongs to (key, revision, subject, name), so logging or
printing one never copies a secret into a log, plain or decrypted."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec
import rich.pretty

import jetstream
from jetstream._protocol.message import ns_of_time
from kvstore import Entry, Op, TypedEntry
from objstore._many import UploadItem  # what each Spark upload task carries

SECRET = b"hunter2-TOPSECRET"
WHEN = datetime(2026, 1, 2, tzinfo=UTC)
WHEN_NS = ns_of_time(WHEN)


class Login(msgspec.Struct):
    user: str
    password: str


def _shown(thing: object) -> str:
    """Every way a program or a tool prints an object."""
    return "\n".join((repr(thing), str(thing), f"{thing}", rich.pretty.pretty_repr(thing)))


def test_an_entry_shows_its_key_revision_and_size_not_its_value() -> None:
    entry = Entry(bucket="b", key="db.password", value=SECRET, revision=7, created_ns=WHEN_NS)
    shown = _shown(entry)
    assert "hunter2" not in shown and "TOPSECRET" not in shown
    assert "db.password" in repr(entry) and "revision=7" in repr(entry)
    assert f"<{len(SECRET)} bytes>" in repr(entry)
    assert entry == Entry(
        bucket="b", key="db.password", value=SECRET, revision=7, created_ns=WHEN_NS
    )


def test_a_typed_entry_shows_the_values_type_not_the_value() -> None:
    raw = msgspec.json.encode(Login("alice", "hunter2"))
    entry = Entry(bucket="b", key="login", value=raw, revision=3, created_ns=WHEN_NS, op=Op.PUT)
    typed = TypedEntry(entry, Login("alice", "hunter2"), None)
    shown = _shown(typed)
    assert "hunter2" not in shown and "alice" not in shown
    assert "'login'" in repr(typed) and "revision=3" in repr(typed) and "Login" in repr(typed)


def test_a_stored_message_shows_its_subject_and_size_not_its_data() -> None:
    message = jetstream.StoredMessage(
        subject="$KV.b.k", seq=4, time_ns=WHEN_NS, headers={}, data=SECRET
    )
    shown = _shown(message)
    assert "hunter2" not in shown and "$KV.b.k" in shown and "seq=4" in repr(message)


def test_an_upload_item_shows_its_name_and_size_not_its_data() -> None:
    item = UploadItem("report.csv", data=SECRET)
    shown = _shown(item)
    assert "hunter2" not in shown and "report.csv" in shown
    assert "data=None" in repr(UploadItem("a", path="/tmp/a"))
