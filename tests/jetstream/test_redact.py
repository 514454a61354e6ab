"""Credentials are removed from URLs and from free text that quotes them."""

from __future__ import annotations

import time

import pytest

from jetstream._redact import redact_text, redact_url, redact_urls


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("nats://alice:S3cret@127.0.0.1:4222", "nats://127.0.0.1:4222"),
        ("nats://tok3n@127.0.0.1:4222", "nats://127.0.0.1:4222"),
        ("tls://u:p@ss/w@rd@host:4443", "tls://host:4443"),
        ("alice:S3cret@127.0.0.1:4222", "127.0.0.1:4222"),
        ("nats://127.0.0.1:4222", "nats://127.0.0.1:4222"),
        ("127.0.0.1", "127.0.0.1"),
        ("", ""),
    ],
)
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_redact_urls_and_text() -> None:
    assert redact_urls(["nats://a:b@h1:1", "nats://t@h2:2"]) == "nats://h1:1, nats://h2:2"
    assert redact_urls("nats://a:b@h:1") == "nats://h:1"
    text = "cannot connect to 'nats://alice:pw@h:1' and ws://tok@h2:2/path: refused"
    assert redact_text(text) == "cannot connect to 'nats://h:1' and ws://h2:2/path: refused"
    assert redact_text("no url here: user@example.com") == "no url here: user@example.com"


def test_glued_urls_lose_every_credential() -> None:
    """Several URLs without a separator: cutting a host too is fine, leaking is not."""
    shown = redact_text("nats://a:pw1@h1:1,nats://c:pw2@h2:2")
    assert "pw1" not in shown and "pw2" not in shown and shown.endswith("h2:2")


@pytest.mark.parametrize("text", ["://" * 50_000, "a" * 150_000, "x://y@" * 25_000])
def test_redaction_is_linear_whatever_a_peer_sends(text: str) -> None:
    started = time.perf_counter()
    redact_text(text)
    assert time.perf_counter() - started < 1.0  # a backtracking pattern took 13 s on the first
