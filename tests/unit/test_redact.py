"""Credentials are removed from URLs and from free text that quotes them."""

from __future__ import annotations

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
