"""The blocking twins of locks and elections (kvstore.sync): the same leases, fences and
errors without async."""

from __future__ import annotations

import os
import random
import signal
import threading
from collections.abc import Callable

import pytest

import jetstream.sync
import kvstore
import kvstore.sync


def test_a_blocking_lock_fences_writes_and_excludes_other_threads(
    sync_js: jetstream.sync.JetStream, unique_name: Callable[[str], str]
) -> None:
    name = unique_name("kv")
    bucket = kvstore.sync.create_bucket(sync_js, name, marker_ttl="1s")
    try:
        inside: list[int] = []
        overlaps: list[int] = []

        def hold(n: int) -> None:
            for _ in range(3):
                with bucket.lock("jobs.nightly", ttl=3, timeout=30) as lease:
                    if inside:
                        overlaps.append(n)
                    inside.append(n)
                    bucket.put(f"report.{n}", b"done", fence=lease)
                    assert lease.held and lease.revision > lease.token
                    inside.remove(n)
                assert not lease.held

        threads = [threading.Thread(target=hold, args=(n,)) for n in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert overlaps == []
        assert sorted(bucket.keys("report.>")) == ["report.0", "report.1", "report.2"]
        with bucket.lock("jobs.nightly", ttl=3) as lease:
            bucket.purge("jobs.nightly")  # taken away behind the holder's back
            with pytest.raises(kvstore.LeaseLostError):
                bucket.put_many({"report.3": b"late"}, fence=lease)
            lease.wait_lost()
            assert not lease.held
        with pytest.raises(kvstore.InvalidTTLError, match="at least 3s"):
            bucket.lock("jobs.nightly", ttl=1)
    finally:
        kvstore.sync.delete_bucket(sync_js, name)


def test_a_blocking_election_names_its_leader_and_observes_it(
    sync_js: jetstream.sync.JetStream, unique_name: Callable[[str], str]
) -> None:
    name = unique_name("kv")
    bucket = kvstore.sync.create_bucket(sync_js, name)
    try:
        election = bucket.election("leaders.indexer", ttl=3)
        assert election.leader() is None
        with election.campaign(b"node-1") as lease:
            assert lease.value == b"node-1" and election.leader() == b"node-1"
            leaders = election.observe()
            assert next(leaders) == b"node-1"
            with pytest.raises(kvstore.LockTimeoutError), election.campaign(b"node-2", timeout=0):
                pass
        with election.campaign(b"node-2"):
            assert next(leaders) == b"node-2"
        leaders.close()  # type: ignore[attr-defined]
        assert election.leader() is None
    finally:
        kvstore.sync.delete_bucket(sync_js, name)


def test_ctrl_c_as_a_blocking_lock_is_taken_never_leaves_it_held(
    sync_js: jetstream.sync.JetStream, unique_name: Callable[[str], str]
) -> None:
    # Ctrl-C lands at varying points of `with bucket.lock(...)`: while the call is handed
    # to the loop, while the lock is taken, as it was just taken, inside the block, while it
    # is released. Whatever it cut short, nothing may be left holding the lock (a renewer
    # on the loop thread would keep it for ever).
    name = unique_name("kv")
    bucket = kvstore.sync.create_bucket(sync_js, name)
    interrupted = threading.Event()

    def ctrl_c(signum: int, frame: object) -> None:
        interrupted.set()
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, ctrl_c)
    delays = random.Random(0)
    try:
        for _ in range(60):
            interrupted.clear()
            timer = threading.Timer(
                delays.uniform(0.0, 0.004), os.kill, (os.getpid(), signal.SIGINT)
            )
            try:
                timer.start()  # its Ctrl-C may land before start() returns, on a busy machine
                with bucket.lock("jobs.nightly", ttl=30, timeout=0):
                    pass
                timer.join()
                while not interrupted.is_set():  # Ctrl-C after the block lands here
                    pass
            except KeyboardInterrupt:
                pass
            timer.join()
            with pytest.raises(kvstore.KeyNotFoundError):
                bucket.get("jobs.nightly")  # not held by anyone
    finally:
        signal.signal(signal.SIGINT, previous)
        kvstore.sync.delete_bucket(sync_js, name)
