"""OwnWrites: the per-handle record of revisions written, bounded like an LRU."""

from __future__ import annotations

from kvstore._own_writes import REMEMBERED_KEYS, OwnWrites


def test_remembers_the_newest_revision_per_key_and_overall() -> None:
    writes = OwnWrites()
    writes.note("a", 5)
    writes.note("b", 7)
    writes.note("a", 3)  # an older ack arriving late never lowers the floor
    assert (writes.revision("a"), writes.revision("b"), writes.revision("c")) == (5, 7, 0)
    assert writes.latest == 7


def test_forgets_the_least_recently_written_key_beyond_the_bound() -> None:
    writes = OwnWrites()
    for i in range(REMEMBERED_KEYS):
        writes.note(f"k{i}", i + 1)
    writes.note("k0", REMEMBERED_KEYS + 1)  # k0 is now the most recent
    writes.note("new", REMEMBERED_KEYS + 2)
    assert writes.revision("k1") == 0
    assert writes.revision("k0") == REMEMBERED_KEYS + 1
    assert writes.revision("new") == REMEMBERED_KEYS + 2
    assert writes.latest == REMEMBERED_KEYS + 2
