"""The object model's checker on hand-made histories: each promise shown broken once, and a
valid history passes."""

from __future__ import annotations

import hashlib

from objstore import UploadFailedError

from .harness import Call
from .obj_check import ObjOutcome, StoredObject, check_obj
from .obj_run import content

_ids = iter(range(1, 10_000))


def upload(name: str, start: float, end: float, *, failed: bool = False) -> tuple[Call, str]:
    call = Call(next(_ids), 0, "put", {"name": name, "size": 3000}, start=start, end=end)
    if failed:
        call.error = UploadFailedError("source failed")
    else:
        call.result = "info"
    return call, hashlib.sha256(content(call.op_id, 3000)).hexdigest()


def stored(name: str, nuid: str) -> StoredObject:
    return StoredObject(name=name, nuid=nuid, size=3000, chunks=3, link=False)


def test_a_valid_history_passes() -> None:
    put, digest = upload("a", 0, 1)
    outcome = ObjOutcome([put], {digest: put.op_id}, [stored("a", "N1")], {"N1"}, {"a": digest})
    assert check_obj(outcome) == []


def test_bytes_no_upload_wrote_are_reported() -> None:
    put, digest = upload("a", 0, 1)
    read = Call(next(_ids), 0, "read", {"name": "a"}, start=1, end=2, result="f" * 64)
    outcome = ObjOutcome(
        [put, read], {digest: put.op_id}, [stored("a", "N1")], {"N1"}, {"a": digest}
    )
    assert any("bytes no upload wrote" in v for v in check_obj(outcome))


def test_a_failed_upload_must_never_be_read() -> None:
    put, digest = upload("a", 0, 1, failed=True)
    outcome = ObjOutcome([put], {digest: put.op_id}, [stored("a", "N1")], {"N1"}, {"a": digest})
    assert any("the bytes of failed" in v for v in check_obj(outcome))


def test_a_record_that_does_not_read_back_is_reported() -> None:
    put, digest = upload("a", 0, 1)
    outcome = ObjOutcome(
        [put], {digest: put.op_id}, [stored("a", "N1")], {"N1"}, {"a": KeyError("gone")}
    )
    assert any("does not read back" in v for v in check_obj(outcome))


def test_chunks_of_no_live_record_are_left_behind() -> None:
    put, digest = upload("a", 0, 1)
    outcome = ObjOutcome(
        [put], {digest: put.op_id}, [stored("a", "N1")], {"N1", "N2"}, {"a": digest}
    )
    assert any("chunks left behind under ['N2']" in v for v in check_obj(outcome))


def test_an_older_version_coming_back_is_a_lost_upload() -> None:
    old, old_digest = upload("a", 0, 1)
    new, new_digest = upload("a", 2, 3)
    contents = {old_digest: old.op_id, new_digest: new.op_id}
    outcome = ObjOutcome([old, new], contents, [stored("a", "N1")], {"N1"}, {"a": old_digest})
    assert any("upload lost" in v and f"#{old.op_id}" in v for v in check_obj(outcome))
