"""The KV model: what the library promises, checked against one recorded history.

The server orders every write by its stream sequence (the revision), so the checker needs no
search over interleavings: it rebuilds what the stream held from every source that knows a
message (acknowledged writes, reads, watches, and the stream itself after the history) and
checks each observation against it. Values are unique per write (``<op id>:<key>``), so a
value seen anywhere names the write that made it.

Promises checked (each violation is one line of the report):

- a sequence is never claimed by two different messages (reads and acks agree);
- an acknowledged write is in the stream at the end, unless something legitimately removed
  it: a later purge of its key, a later write with a TTL (a key TTL rolls up the older
  revisions), ``history`` newer revisions, or its TTL;
- writes are linearizable: one acknowledged before another started has a lower revision;
- compare-and-set: an accepted update had no other write on its key between the revision it
  named and its own; an accepted create had no live value before it; a refused update's
  revision had been replaced; a refused or abandoned batch and a refused CAS leave no value;
- atomic batches: an acknowledged ``put_many`` is one contiguous run of revisions, one whose
  outcome is unknown is stored whole or not at all, no snapshot falls inside one;
- reads: ``get`` returns a value that was written, never one older than a write acknowledged
  before the read began, and finds a live value that nothing could have removed;
- ``get_many`` is the bucket at one sequence, not older than any acknowledged write;
- a watch delivers revisions strictly in order, each once, each matching the stream, and every
  message retained at the end from its start revision on.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from kvstore import Entry, KeyExistsError, Snapshot, WrongRevisionError

from .harness import Call, RawMessage, error_violations

WRITE_KINDS = {"put", "create", "update", "delete", "purge"}


@dataclass(frozen=True)
class Msg:
    seq: int
    key: str
    op: str  # PUT | DEL | PURGE | EXPIRED
    value: bytes = b""

    def same(self, other: Msg) -> bool:
        return (self.key, self.op, self.value) == (other.key, other.op, other.value)


@dataclass
class KvOutcome:
    """What a KV history produced: its calls, the watches' deliveries, the final stream."""

    history: int  # the bucket's revisions per key
    calls: list[Call]
    final: list[Msg]
    watches: dict[int, tuple[int, list[Msg]]] = field(default_factory=dict)  # op id -> (from, seen)


def msg_from_raw(raw: RawMessage, prefix: str) -> Msg:
    """A stored message as the model sees it (its own header reading, not the library's)."""
    operation = raw.headers.get("KV-Operation")
    reason = raw.headers.get("Nats-Marker-Reason")
    op = operation if operation in ("DEL", "PURGE") else "PUT"
    if operation is None and reason is not None:
        op = {"MaxAge": "EXPIRED", "Purge": "PURGE", "Remove": "DEL"}.get(reason, "PUT")
    return Msg(raw.seq, raw.subject.removeprefix(prefix), op, raw.data)


def msg_from_entry(entry: Entry) -> Msg:
    return Msg(entry.revision, entry.key, entry.op.value, entry.value)


def value_of(op_id: int, key: str) -> bytes:
    return f"{op_id}:{key}".encode()


def intended(call: Call) -> dict[str, Msg]:
    """The messages a write call tries to store, by key (sequence 0: not known yet)."""
    if call.kind == "put_many" or call.kind == "batch_abandon":
        return {key: Msg(0, key, "PUT", value_of(call.op_id, key)) for key in call.args["keys"]}
    if call.kind in ("put", "create", "update"):
        key = call.args["key"]
        return {key: Msg(0, key, "PUT", value_of(call.op_id, key))}
    if call.kind in ("delete", "purge"):
        key = call.args["key"]
        return {key: Msg(0, key, "DEL" if call.kind == "delete" else "PURGE")}
    return {}


class _Log:
    """Every message known to have been stored, by sequence."""

    def __init__(self) -> None:
        self.by_seq: dict[int, Msg] = {}
        self.violations: list[str] = []
        self.by_key: dict[str, list[Msg]] = defaultdict(list)

    def learn(self, msg: Msg, source: str) -> None:
        known = self.by_seq.get(msg.seq)
        if known is None:
            self.by_seq[msg.seq] = msg
        elif not known.same(msg):
            self.violations.append(f"sequence {msg.seq}: {source} saw {msg}, known as {known}")

    def index(self) -> None:
        self.by_key.clear()
        for seq in sorted(self.by_seq):
            msg = self.by_seq[seq]
            self.by_key[msg.key].append(msg)

    def latest_before(self, key: str, seq: int, *, inclusive: bool = False) -> Msg | None:
        found = None
        for msg in self.by_key.get(key, []):
            if msg.seq < seq or (inclusive and msg.seq == seq):
                found = msg
        return found

    def newer(self, key: str, seq: int) -> list[Msg]:
        return [msg for msg in self.by_key.get(key, []) if msg.seq > seq]


class KvChecker:
    def __init__(self, outcome: KvOutcome) -> None:
        self.outcome = outcome
        self.calls = outcome.calls
        self.log = _Log()
        self.final_seqs = {msg.seq for msg in outcome.final}
        self.ttl_values = {
            value_of(call.op_id, key)
            for call in self.calls
            if call.args.get("ttl") is not None
            for key in intended(call)
        }
        self.violations: list[str] = []

    # -- building the log -----------------------------------------------------------------

    def acked_writes(self) -> list[tuple[Call, list[Msg]]]:
        found = []
        for call in self.calls:
            if not call.ok or call.kind not in WRITE_KINDS | {"put_many"}:
                continue
            revisions = call.result if isinstance(call.result, dict) else None
            msgs = []
            for key, msg in intended(call).items():
                seq = revisions[key] if revisions is not None else call.result
                msgs.append(Msg(seq, key, msg.op, msg.value))
            found.append((call, msgs))
        return found

    def build_log(self) -> None:
        for call, msgs in self.acked_writes():
            for msg in msgs:
                self.log.learn(msg, f"the ack of #{call.op_id} {call.kind}")
        for msg in self.outcome.final:
            self.log.learn(msg, "the final stream")
        for call in self.calls:
            if not call.ok:
                continue
            if call.kind == "get":
                self.log.learn(msg_from_entry(call.result), f"get #{call.op_id}")
            elif call.kind == "get_many":
                for entry in call.result.values():
                    self.log.learn(msg_from_entry(entry), f"get_many #{call.op_id}")
        for op_id, (_, seen) in self.outcome.watches.items():
            for msg in seen:
                self.log.learn(msg, f"watch #{op_id}")
        self.log.index()
        self.violations += self.log.violations

    # -- predicates -------------------------------------------------------------------------

    def removable(self, msg: Msg) -> bool:
        """Whether ``msg`` may have left the stream without breaking a promise. Whatever
        removed it left a trace: a purge tombstone, a newer write with a TTL (a key TTL: it
        rolls the key's older revisions up), newer revisions, or an expiry (a write of
        unknown outcome that landed is in the stream like any other)."""
        newer = self.log.newer(msg.key, msg.seq)
        return (
            any(m.op == "PURGE" or m.value in self.ttl_values for m in newer)
            or len(newer) >= self.outcome.history
            or self.expires(msg)
        )

    def expires(self, msg: Msg) -> bool:
        """Whether ``msg`` leaves the stream on its own (a TTL or an expiry marker)."""
        return msg.op == "EXPIRED" or msg.value in self.ttl_values

    def live_forever(self, msg: Msg) -> bool:
        """A value nothing could have removed: no TTL, nothing newer on its key."""
        return (
            msg.op == "PUT"
            and msg.value not in self.ttl_values
            and not self.log.newer(msg.key, msg.seq)
        )

    # -- checks ---------------------------------------------------------------------------

    def check(self) -> list[str]:
        self.violations += error_violations(self.calls)
        self.build_log()
        acked = self.acked_writes()
        self.check_acked(acked)
        self.check_order(acked)
        self.check_never_stored()
        self.check_unknown_batches()
        for call in self.calls:
            check = getattr(self, f"check_{call.kind}", None)
            if check is not None:
                check(call, acked)
        self.check_watches()
        return self.violations

    def check_acked(self, acked: list[tuple[Call, list[Msg]]]) -> None:
        for call, msgs in acked:
            for msg in msgs:
                if msg.seq not in self.final_seqs and not self.removable(msg):
                    self.violations.append(f"acknowledged write lost: {msg} of {call.describe()}")
            if call.kind == "put_many":
                seqs = sorted(msg.seq for msg in msgs)
                if seqs != list(range(seqs[0], seqs[0] + len(seqs))):
                    self.violations.append(f"put_many not one contiguous run: {call.describe()}")

    def check_order(self, acked: list[tuple[Call, list[Msg]]]) -> None:
        spans = [(call, min(m.seq for m in msgs), max(m.seq for m in msgs)) for call, msgs in acked]
        for first, _, first_high in spans:
            for second, second_low, _ in spans:
                if first.end < second.start and first_high >= second_low:
                    self.violations.append(
                        f"not linearizable: {first.describe()} ended before "
                        f"{second.describe()} started but has a revision >= it"
                    )

    def check_never_stored(self) -> None:
        """Abandoned batches and refused conditional writes leave no value anywhere."""
        for call in self.calls:
            refused = isinstance(call.error, WrongRevisionError | KeyExistsError)
            if call.kind != "batch_abandon" and not refused:
                continue
            for msg in intended(call).values():
                if msg.op != "PUT":
                    continue
                stored = [m for m in self.log.by_seq.values() if m.value == msg.value]
                if stored:
                    self.violations.append(f"{call.describe()} yet stored {stored[0]}")

    def check_unknown_batches(self) -> None:
        """A ``put_many`` whose outcome the client did not learn is stored whole or not at
        all: every key it wrote sits at ``base + position`` when any key was found."""
        by_value = {m.value: m for m in self.log.by_seq.values()}
        for call in self.calls:
            if call.kind != "put_many" or call.ok:
                continue
            keys = call.args["keys"]
            candidates = {i: by_value.get(value_of(call.op_id, k)) for i, k in enumerate(keys)}
            found = {i: m for i, m in candidates.items() if m is not None}
            if not found:
                continue
            position, first = next(iter(found.items()))
            base = first.seq - position
            for i, key in enumerate(keys):
                expected = Msg(base + i, key, "PUT", value_of(call.op_id, key))
                if i in found:
                    if found[i].seq != expected.seq:
                        self.violations.append(f"batch not contiguous: {call.describe()}")
                elif expected.seq not in self.final_seqs and not self.removable(expected):
                    self.violations.append(f"half a batch stored: {key} of {call.describe()}")

    def check_update(self, call: Call, _acked: Any) -> None:
        self._check_cas(call, call.args["key"], call.args["revision"], call.result)

    def check_create(self, call: Call, _acked: Any) -> None:
        self._check_cas(call, call.args["key"], 0, call.result)

    def check_put_many(self, call: Call, _acked: Any) -> None:
        for key, expected in call.args.get("expect", {}).items():
            self._check_cas(call, key, expected, call.result[key] if call.ok else None)

    def _check_cas(self, call: Call, key: str, expected: int, revision: int | None) -> None:
        if call.ok and revision is not None:
            before = self.log.latest_before(key, revision)
            if before is None:
                return
            if expected == 0 and before.op == "PUT" and before.value not in self.ttl_values:
                self.violations.append(f"create over live {before}: {call.describe()}")
            if expected > 0 and before.seq > expected:
                self.violations.append(f"CAS accepted over newer {before}: {call.describe()}")
            return
        if isinstance(call.error, WrongRevisionError) and expected > 0:
            named = self.log.by_seq.get(expected)
            if (
                named is not None
                and named.key == key
                and not self.log.newer(key, expected)
                and named.value not in self.ttl_values
            ):
                self.violations.append(
                    f"CAS refused though {named} was never replaced: {call.describe()}"
                )
        if isinstance(call.error, KeyExistsError) and not self.log.by_key.get(key):
            self.violations.append(f"create refused on a key never written: {call.describe()}")

    def check_get(self, call: Call, acked: list[tuple[Call, list[Msg]]]) -> None:
        key = call.args["key"]
        before = [
            m for c, msgs in acked if c.end < call.start for m in msgs if m.key == key
        ]  # writes on the key acknowledged before the read began
        if call.ok:
            entry: Entry = call.result
            stale = [m for m in before if m.seq > entry.revision]
            if stale:
                self.violations.append(f"stale read, {stale[-1]} was acked: {call.describe()}")
        elif type(call.error).__name__ == "KeyNotFoundError":
            live = [m for m in before if self.live_forever(m)]
            if live:
                self.violations.append(f"get missed live {live[0]}: {call.describe()}")

    def check_get_many(self, call: Call, acked: list[tuple[Call, list[Msg]]]) -> None:
        if not call.ok:
            return
        snapshot: Snapshot = call.result
        point = snapshot.revision
        for c, msgs in acked:
            seqs = [m.seq for m in msgs]
            if c.end < call.start and max(seqs) > point:
                self.violations.append(
                    f"snapshot at {point} older than acked {c.describe()}: {call.describe()}"
                )
            if c.kind == "put_many" and min(seqs) <= point < max(seqs):
                self.violations.append(f"snapshot at {point} tears {c.describe()}")
        for key in call.args["keys"]:
            latest = self.log.latest_before(key, point, inclusive=True)
            entry = snapshot.get(key)
            if entry is not None:
                if entry.revision > point:
                    self.violations.append(f"{key} at {entry.revision} beyond snapshot {point}")
                elif latest is not None and latest.seq != entry.revision:
                    self.violations.append(
                        f"snapshot at {point} shows {key} at {entry.revision}, "
                        f"but {latest} is newer: #{call.op_id}"
                    )
            elif latest is not None and self.live_forever(latest):
                self.violations.append(f"snapshot at {point} misses live {latest}: #{call.op_id}")

    def check_watches(self) -> None:
        for op_id, (start, seen) in self.outcome.watches.items():
            revisions = [m.seq for m in seen]
            if revisions != sorted(set(revisions)):
                self.violations.append(f"watch #{op_id} out of order or repeated: {revisions}")
            delivered = set(revisions)
            missed = sorted(
                msg.seq
                for msg in self.outcome.final
                if msg.seq >= start and msg.seq not in delivered and not self.expires(msg)
            )
            if missed:
                self.violations.append(
                    f"watch #{op_id} from {start} missed retained revisions {missed[:10]}"
                )
            for msg in seen:
                if msg.seq < start:
                    self.violations.append(f"watch #{op_id} from {start} delivered {msg}")


def check_kv(outcome: KvOutcome) -> list[str]:
    """Every broken promise in ``outcome``, one line each (empty: the history is valid)."""
    return KvChecker(outcome).check()
