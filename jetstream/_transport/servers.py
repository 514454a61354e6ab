"""The server list of a connect: URLs from one comma-separated string (``$NATS_URL``,
``--server``, the ``servers`` option) or a list, each checked before nats-py parses it.

A password may hold ``,``: cut at every comma, ``nats://alice:pa,ss@host`` became
``nats://alice:pa`` (a "URL" with no ``@`` left to mark the password as one, so every message
showed it) and ``ss@host``. Here a URL's user info runs to its last ``@`` before the next
``scheme://``, the rule :func:`jetstream._redact.redact_text` applies to text, so a list is
only ever cut between whole URLs.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Iterable

from .._errors import ClientValidationError

__all__ = ["server_list", "split_servers"]

_SCHEME = r"[A-Za-z][A-Za-z0-9+.-]*://"
# A comma followed by a scheme starts the next URL, whatever the text before it holds.
_NEXT_URL = re.compile(rf",\s*(?={_SCHEME})")
_LEADING_SCHEME = re.compile(_SCHEME)

# What ends a URL's authority for nats-py's parser (urllib): a password holding one is cut
# there, its end read as the host and port.
_CUTS_A_PASSWORD = frozenset("/?#")


def split_servers(text: str) -> list[str]:
    """The URLs of a comma-separated list. A comma in a URL's user info (up to its last ``@``
    before the next ``scheme://``) is part of it: ``nats://u:a,b@h1,nats://h2`` is two URLs.
    A URL with user info after a scheme-less one must have its own scheme (in
    ``h1,u:p@h2`` the user info would run from ``h1`` on: one URL, never a password cut)."""
    urls: list[str] = []
    for piece in _NEXT_URL.split(text):
        userinfo, at, hosts = piece.rpartition("@")
        first, *others = hosts.split(",")
        urls.append(userinfo + at + first)
        urls.extend(others)
    return [url.strip() for url in urls if url.strip()]


def server_list(servers: str | Iterable[str]) -> list[str]:
    """``servers`` as the URLs to try: a string is split with :func:`split_servers`, a list
    taken as it is; every URL is checked so that nats-py can parse it whole.

    Raises:
        ClientValidationError: no URL, an entry that is not a str, user info holding ``/``,
            ``?`` or ``#`` (the parser would cut the password there), a port that is no
            number. The message names the entry by its position and quotes nothing of it.
    """
    if isinstance(servers, str):
        urls = split_servers(servers)
    else:
        given = list(servers) if isinstance(servers, Iterable) else [None]
        if not all(isinstance(url, str) for url in given):
            raise ClientValidationError("servers must be a URL string or a list of URL strings")
        urls = [url.strip() for url in given if url.strip()]
    if not urls:
        raise ClientValidationError("servers holds no URL")
    for index, url in enumerate(urls, 1):
        problem = _problem(url)
        if problem:
            raise ClientValidationError(f"servers: entry {index} of {len(urls)} {problem}")
    return urls


def _problem(url: str) -> str:
    scheme = _LEADING_SCHEME.match(url)
    rest = url[scheme.end() :] if scheme else url
    userinfo, _, host = rest.rpartition("@")
    if _CUTS_A_PASSWORD.intersection(userinfo):
        return (
            "has user info holding '/', '?' or '#', which a URL cannot carry here: give the "
            "password or token on its own (the password or token option; --password, --token)"
        )
    try:
        _ = urllib.parse.urlsplit(f"{scheme[0] if scheme else 'nats://'}{host}").port
    except ValueError:  # its message would quote the "port": never chained
        return "has no valid port (a host:port after the last '@')"
    return ""
