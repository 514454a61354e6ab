"""Client-side encryption: a KV bucket whose values the server (and every other reader of the
stream) only ever sees as AES-256-GCM ciphertext; then a key rotation with ``rekey()``.

Keys come from a key file (``$JETSTORE_KEY_FILE``), never from code. Without one this demo
writes a throwaway key file into a temporary directory (readable by you only); a real
deployment keeps it in its secret store. Runs against $NATS_URL when set, otherwise an
embedded nats-server on a free loopback port.

    python examples/encrypted.py
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import jetstream
import kvstore


@contextlib.asynccontextmanager
async def nats_url() -> AsyncIterator[str]:
    """$NATS_URL if given, else the URL of an embedded server that lives for the block."""
    if url := os.environ.get("NATS_URL"):
        print(f"using the NATS server at {url} (from NATS_URL)")
        yield url
        return
    async with jetstream.EmbeddedServer() as server:
        print(f"using an embedded nats-server at {server.url} (pid {server.pid})")
        yield server.url


@contextlib.contextmanager
def key_file() -> Iterator[Path]:
    """$JETSTORE_KEY_FILE, or a demo key file with one fresh key (deleted afterwards)."""
    if path := os.environ.get("JETSTORE_KEY_FILE"):
        yield Path(path)
        return
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "keys.json"
        write_key_file(path, primary="2026-01", new_key_id="2026-01")
        yield path


def write_key_file(path: Path, *, primary: str, new_key_id: str) -> None:
    """Add a fresh random key to the key file at ``path`` and set the primary (0600)."""
    document = json.loads(path.read_text()) if path.exists() else {"keys": {}}
    key = jetstream.Keyring.new_key()
    document["keys"][new_key_id] = base64.b64encode(key).decode()
    document["primary"] = primary
    path.touch(mode=0o600)
    path.write_text(json.dumps(document))


async def main() -> None:
    async with nats_url() as url, await jetstream.connect(url) as js:
        with key_file() as path:
            keyring = jetstream.Keyring.from_file(path)
            print("loaded", keyring)  # key ids only: a Keyring never shows key material
            bucket = await kvstore.create_bucket(js, "vault", history=3, encryption=keyring)
            try:
                await demo(js, bucket, path)
            finally:
                await kvstore.delete_bucket(js, "vault")


async def demo(js: jetstream.JetStream, bucket: kvstore.Bucket, path: Path) -> None:
    rev = await bucket.put("db.password", b"correct horse battery staple")
    await bucket.update("db.password", b"hunter2", revision=rev)  # CAS works as usual
    await bucket.put_many({"api.token": b"tok-123", "smtp.password": b"s3cret"})
    print("get db.password ->", (await bucket.get("db.password")).value)

    # What the server, a backup or another client sees: the key, a header, and ciphertext.
    stored = await js.get_last_message(bucket.stream, "$KV.vault.db.password")
    print(f"stored: {stored.headers[jetstream.headers.ENCRYPTION]!r} {stored.data[:12].hex()}...")

    # Rotation: a new primary key; old values still read, rekey() moves them over.
    primary = "2026-11"
    write_key_file(path, primary=primary, new_key_id=primary)
    rotated = await kvstore.open_bucket(js, "vault", encryption=jetstream.Keyring.from_file(path))
    print("after rotation, get api.token ->", (await rotated.get("api.token")).value)
    report = await rotated.rekey()
    print(f"rekey: {report.rekeyed} values re-encrypted, {report.current} already current")
    again = await rotated.rekey()
    print(f"rekey again: {again.rekeyed} re-encrypted, {again.current} current (resumable)")

    # A value copied to another key (bytes and header) does not decrypt: values are bound to
    # their bucket and key.
    token = await js.get_last_message(bucket.stream, "$KV.vault.api.token")
    header = {jetstream.headers.ENCRYPTION: token.headers[jetstream.headers.ENCRYPTION]}
    await js.publish("$KV.vault.stolen", token.data, headers=header)
    try:
        await rotated.get("stolen")
    except jetstream.DecryptionError as exc:
        print("a value copied to another key is refused:", type(exc).__name__)


if __name__ == "__main__":
    asyncio.run(main())
