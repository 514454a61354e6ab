"""Hostile review (s10) of client-side encryption on a real server: each test asserts what a
user relies on and fails on the current code. (Keyring input breaks: tests/unit/
test_enc_breaks_s10.py.)"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

import jetstream
from jetstream import Keyring
from tests.conftest import BucketFactory

RING1 = Keyring({"k1": bytes(range(32))}, primary="k1")
ENC = jetstream.headers.ENCRYPTION


@pytest.mark.parametrize("header", [["v1;k1"], {"v1": "k1"}], ids=["list", "dict"])
async def test_decode_entry_with_an_odd_encryption_header_raises_a_library_error(
    js: jetstream.JetStream, make_bucket: BucketFactory, header: object
) -> None:
    """decode_entry (public: for messages read elsewhere, e.g. a sourced copy) on an encrypted
    bucket: a Jetstore-Enc header value that is not a str must raise one of the library's
    errors (a str check already exists: an int gives ClientValidationError), never a raw
    exception. A list (the shape object meta headers have) raised a raw
    ``TypeError: unhashable type: 'list'`` from the opener cache lookup."""
    bucket = await make_bucket(encryption=RING1)
    await bucket.put("k", b"secret")
    stored = await js.get_last_message(bucket.stream, f"$KV.{bucket.name}.k")
    with pytest.raises(jetstream.JetStreamError):
        bucket.decode_entry(
            stored.subject,
            stored.data,
            revision=stored.seq,
            created=datetime.now(UTC),
            headers={ENC: header},  # type: ignore[dict-item]
        )
