"""Writes whose attempts may repeat (a Spark micro-batch replayed after a failure) and must
still store each object once: every meta record such a write stores carries its tag in a
header, and an attempt that finds its own tag on the name's record stores nothing more.

Why a tag on the meta record and not a progress record: the meta record is the one message
that makes an object exist (its chunks, however many, are invisible until it is stored, and
purged when the upload fails), and it is written only if the name's record is still the one
read before (``Nats-Expected-Last-Subject-Sequence``). So the tag is stored exactly when the
object is, in the same message, whatever the number of chunks; two attempts racing cannot
both store it (the second's write fails its condition, it reads the record again and finds
the first's tag); and the tag stays as long as the record, so a replay after the stream's
duplicate window still finds it.
"""

from __future__ import annotations

import dataclasses

from ._errors import DuplicateObjectNameError
from ._models import ObjectInfo

__all__ = ["WRITE_HEADER", "StoredAlready", "WriteTag"]

WRITE_HEADER = "Jetstore-Write"
"""The meta record header holding the tag of the write that stored it."""


@dataclasses.dataclass(frozen=True)
class WriteTag:
    """``part`` of the write ``write`` (e.g. a partition of a streaming query's micro-batch):
    the write stores each name once, from one of its parts."""

    write: str
    part: str

    @property
    def text(self) -> str:
        return f"{self.write}/{self.part}"

    def holds(self, info: ObjectInfo) -> bool:
        """Whether ``info`` is the record this part stored (in an earlier attempt).

        Raises:
            DuplicateObjectNameError: another part of the same write stored the name (two
                rows of one write name it, or a replay gave the row to another part).
        """
        found = ((info.headers or {}).get(WRITE_HEADER) or [""])[0]
        if found == self.text:
            return True
        write, _, part = found.rpartition("/")
        if write == self.write:
            raise DuplicateObjectNameError(
                f"object {info.name!r} was stored by part {part} of the same write "
                f"({self.write}), and part {self.part} names it too: each name may be "
                "written once per write (or the replay gave its row to another part: the "
                "input is not deterministic). Nothing more was stored for it.",
                (info.name,),
            )
        return False


class StoredAlready(Exception):
    """Raised by an upload with a :class:`WriteTag` that found its tag on the name's record:
    an earlier attempt stored the object (``info``); this one stored nothing."""

    def __init__(self, info: ObjectInfo) -> None:
        super().__init__(f"{info.name!r} is stored already")
        self.info = info
