"""Least-privilege permission templates per role (documented in docs/RELIABILITY.md), as the
nats-server configuration blocks the security tests run with."""

from __future__ import annotations

import json


def kv_reader(bucket: str, inbox: str = "_INBOX") -> dict[str, object]:
    """Read a bucket: get, get_many, watch, keys, history."""
    stream = f"KV_{bucket}"
    return {
        "publish": {"allow": [
            "$JS.API.INFO", f"$JS.API.STREAM.INFO.{stream}", "$JS.API.STREAM.NAMES",
            f"$JS.API.DIRECT.GET.{stream}", f"$JS.API.DIRECT.GET.{stream}.>",
            f"$JS.API.CONSUMER.CREATE.{stream}.>", f"$JS.API.CONSUMER.MSG.NEXT.{stream}.>",
            f"$JS.API.CONSUMER.DELETE.{stream}.>",
        ]},
        "subscribe": {"allow": [f"{inbox}.>"]},
    }  # fmt: skip


def kv_writer(bucket: str, prefix: str, inbox: str = "_INBOX") -> dict[str, object]:
    """Write (and read back) the keys under ``<prefix>.``: put, create, update, delete, purge,
    put_many, get."""
    stream = f"KV_{bucket}"
    return {
        "publish": {"allow": [
            f"$KV.{bucket}.{prefix}.>", "$JS.API.INFO", f"$JS.API.STREAM.INFO.{stream}",
            "$JS.API.STREAM.NAMES", f"$JS.API.DIRECT.GET.{stream}",
            f"$JS.API.DIRECT.GET.{stream}.$KV.{bucket}.{prefix}.>",
        ]},
        "subscribe": {"allow": [f"{inbox}.>"]},
    }  # fmt: skip


def object_uploader(store: str, inbox: str = "_INBOX") -> dict[str, object]:
    """Upload to and read from one object store (fast ingest needs the chunk and meta
    subjects, purge for cleaning up after a failure, the leader's MSG.GET for reading the
    meta record a conditional rewrite depends on)."""
    stream = f"OBJ_{store}"
    return {
        "publish": {"allow": [
            f"$O.{store}.>", "$JS.API.INFO", f"$JS.API.STREAM.INFO.{stream}",
            "$JS.API.STREAM.NAMES", f"$JS.API.DIRECT.GET.{stream}",
            f"$JS.API.DIRECT.GET.{stream}.>", f"$JS.API.STREAM.PURGE.{stream}",
            f"$JS.API.STREAM.MSG.GET.{stream}", f"$JS.API.CONSUMER.CREATE.{stream}.>", f"$JS.API.CONSUMER.MSG.NEXT.{stream}.>",
            f"$JS.API.CONSUMER.DELETE.{stream}.>",
        ]},
        "subscribe": {"allow": [f"{inbox}.>"]},
    }  # fmt: skip


def server_config(users: dict[str, dict[str, object] | None]) -> str:
    """An ``authorization`` block: user name = password; None = no restrictions (admin)."""
    entries = []
    for name, permissions in users.items():
        entry: dict[str, object] = {"user": name, "password": f"{name}-pw"}
        if permissions is not None:
            entry["permissions"] = permissions
        entries.append(entry)
    return "authorization {\n  users = " + json.dumps(entries, indent=2) + "\n}\n"
