"""The object-store model: what the library promises, checked against one recorded history.

Every upload writes bytes unique to it, so a digest names the upload that wrote it. Checked:

- every call ends within its bound, every error is in the ``JetStreamError`` tree;
- a read (during the history or after it) returns exactly the bytes of one complete upload,
  never a failed upload's, never a mix or a prefix;
- complete or absent: after the history every live record reads back whole;
- nothing left behind: after the history every stored chunk belongs to a live record (only an
  upload whose outcome was unknown, ``CommitUnknownError``, may leave chunks for ``cleanup``);
- no lost upload: an acknowledged upload that no later write to its name overlapped or followed
  is what the name holds at the end (a racing ``update_meta`` must not bring back an older
  version).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from jetstream import CommitUnknownError

from .harness import Call, error_violations

EMPTY = hashlib.sha256(b"").hexdigest()  # every empty upload has it: names none of them


@dataclass(frozen=True)
class StoredObject:
    name: str
    nuid: str
    size: int
    chunks: int
    link: bool


@dataclass
class ObjOutcome:
    calls: list[Call]
    contents: dict[str, int]  # sha256 hex of each upload's bytes -> its op id
    live: list[StoredObject]  # live records at the end
    chunk_nuids: set[str]  # nuids chunks are stored under at the end
    final_reads: dict[str, str | BaseException]  # name -> digest read back, or the error


def _changes_content(call: Call, name: str) -> bool:
    """Whether ``call`` may change what ``name`` holds (an upload that failed cleanly and a
    metadata update do not)."""
    if call.kind == "put":
        return call.args["name"] == name and type(call.error).__name__ != "UploadFailedError"
    if call.kind == "delete":
        return call.args["name"] == name
    if call.kind == "rename":
        return name in (call.args["name"], call.args["new"])
    return False


class ObjChecker:
    def __init__(self, outcome: ObjOutcome) -> None:
        self.outcome = outcome
        self.calls = {call.op_id: call for call in outcome.calls}
        self.failed_uploads = {
            op_id
            for op_id, call in self.calls.items()
            if call.kind == "put" and type(call.error).__name__ == "UploadFailedError"
        }
        self.violations: list[str] = []

    def check(self) -> list[str]:
        self.violations += error_violations(self.outcome.calls)
        for call in self.outcome.calls:
            if call.kind == "read" and call.ok:
                self.check_bytes(call.result, f"read #{call.op_id} of {call.args['name']!r}")
        self.check_final()
        self.check_orphans()
        self.check_no_lost_upload()
        return self.violations

    def check_bytes(self, digest: str, what: str) -> None:
        if digest == EMPTY:
            return
        writer = self.outcome.contents.get(digest)
        if writer is None:
            self.violations.append(f"{what}: bytes no upload wrote (a mix or a prefix)")
        elif writer in self.failed_uploads:
            self.violations.append(f"{what}: the bytes of failed {self.calls[writer].describe()}")

    def check_final(self) -> None:
        for obj in self.outcome.live:
            read = self.outcome.final_reads.get(obj.name)
            if isinstance(read, str):
                self.check_bytes(read, f"final read of {obj.name!r}")
            elif not obj.link:
                self.violations.append(f"live record {obj} does not read back: {read!r}")

    def check_orphans(self) -> None:
        referenced = {obj.nuid for obj in self.outcome.live if not obj.link}
        orphans = self.outcome.chunk_nuids - referenced
        unknown = [
            call
            for call in self.outcome.calls
            if call.kind == "put" and (isinstance(call.error, CommitUnknownError) or call.hung)
        ]
        if len(orphans) > len(unknown):
            self.violations.append(
                f"chunks left behind under {sorted(orphans)} "
                f"({len(unknown)} upload(s) of unknown outcome may leave chunks)"
            )

    def check_no_lost_upload(self) -> None:
        for call in self.outcome.calls:
            if call.kind != "put" or not call.ok or call.args["size"] == 0:
                continue
            name = call.args["name"]
            others = [
                other
                for other in self.outcome.calls
                if other is not call and _changes_content(other, name) and other.end >= call.start
            ]
            if others:
                continue
            read = self.outcome.final_reads.get(name)
            writer = self.outcome.contents.get(read) if isinstance(read, str) else None
            if writer != call.op_id:
                got = "nothing" if read is None else read if writer is None else f"#{writer}"
                self.violations.append(f"upload lost: {name!r} holds {got} after {call.describe()}")


def check_obj(outcome: ObjOutcome) -> list[str]:
    """Every broken promise in ``outcome``, one line each (empty: the history is valid)."""
    return ObjChecker(outcome).check()
