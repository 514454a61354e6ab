"""Credentials out of everything the library shows: reprs, error messages, log lines.

A NATS URL may carry credentials in its userinfo (``nats://user:password@host``,
``nats://token@host``). Every URL the library prints goes through :func:`redact_url`, and
every text that may quote one (a dependency's error message) through :func:`redact_text`.
"""

from __future__ import annotations

import re

__all__ = ["redact_text", "redact_url", "redact_urls"]

# Text is cut at whitespace and quotes; in a piece holding "://", everything from there to the
# last "@" is userinfo. Linear in the text whatever a peer sends, and a password holding "@"
# or "/" goes whole (cutting too much of a garbled URL is the safe side).
_PIECE = re.compile(r"[^\s'\"<>]+")


def redact_url(url: str) -> str:
    """``url`` without its userinfo: ``nats://alice:pw@host:4222`` -> ``nats://host:4222``.

    Works on URLs without a scheme too (``alice:pw@host:4222``, which nats-py accepts), and
    never raises, whatever the string is.
    """
    scheme, sep, rest = url.rpartition("://")
    return f"{scheme}{sep}{rest.rpartition('@')[2]}"  # the last '@': passwords may hold one


def redact_urls(urls: object) -> str:
    """A comma-separated list of ``urls``, each through :func:`redact_url`."""
    if isinstance(urls, str):
        urls = [urls]
    if not isinstance(urls, (list, tuple)):
        return "<servers>"
    return ", ".join(redact_url(str(url)) for url in urls)


def redact_text(text: str) -> str:
    """``text`` with the userinfo of every ``scheme://...@`` URL in it removed (for messages
    written by others, which may quote a server URL)."""
    return _PIECE.sub(_redact_piece, text)


def _redact_piece(match: re.Match[str]) -> str:
    piece = match.group()
    start = piece.find("://")
    at = piece.rfind("@")
    if start < 0 or at < start:
        return piece
    return piece[: start + 3] + piece[at + 1 :]
