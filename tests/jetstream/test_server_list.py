"""A server list is cut between whole URLs only: a password holding ``,`` stays in its URL
(and so is redacted with it), and a URL nats-py would cut is refused without quoting it."""

from __future__ import annotations

import re

import pytest

import jetstream
from jetstream._redact import redact_urls
from jetstream._transport.servers import server_list, split_servers


@pytest.mark.parametrize(
    ("text", "urls"),
    [
        ("nats://h1:4222", ["nats://h1:4222"]),
        ("nats://h1:4222, nats://h2:4222", ["nats://h1:4222", "nats://h2:4222"]),
        ("h1:4222,h2:4222,,", ["h1:4222", "h2:4222"]),
        ("nats://alice:hunter2,rest@h:4222", ["nats://alice:hunter2,rest@h:4222"]),
        ("nats://alice:a,b,c@h:1,nats://h2:2", ["nats://alice:a,b,c@h:1", "nats://h2:2"]),
        ("nats://u:p,1@h1:1,h2:2", ["nats://u:p,1@h1:1", "h2:2"]),
        ("tls://u:p@w@h1:1,tls://v:,q@h2:2", ["tls://u:p@w@h1:1", "tls://v:,q@h2:2"]),
        ("alice:x,y@h:4222", ["alice:x,y@h:4222"]),
        ("nats://alice:123,x@h:4222", ["nats://alice:123,x@h:4222"]),
    ],
)
def test_a_list_is_cut_between_whole_urls(text: str, urls: list[str]) -> None:
    assert split_servers(text) == urls
    assert server_list(text) == urls


@pytest.mark.parametrize(
    "password", ["hunter2,rest", "a,b,c", "p@ss,w@rd", "p:a,s:s", "50%,off", ",lead", "trail,"]
)
def test_no_part_of_a_password_with_a_comma_is_ever_shown(password: str) -> None:
    text = f"nats://alice:{password}@127.0.0.1:4222,nats://bob:{password}@127.0.0.1:4223"
    shown = redact_urls(server_list(text))
    assert shown == "nats://127.0.0.1:4222, nats://127.0.0.1:4223"


@pytest.mark.parametrize("password", ["qa/zz", "12/xy", "kw?qq", "kw#qq", "ab,cd/ef"])
def test_user_info_a_url_parser_would_cut_is_refused_unquoted(password: str) -> None:
    """nats-py's parser ends the authority at ``/``, ``?``, ``#``: ``nats://alice:12/xy@h``
    was a connect to host ``alice``, port 12, and its errors quoted the rest."""
    with pytest.raises(jetstream.ClientValidationError) as caught:
        server_list(f"nats://h0:1,nats://alice:{password}@127.0.0.1:4222")
    error = caught.value
    assert error.__cause__ is None and error.__context__ is None
    assert "entry 2 of 2" in str(error) and "--password" in str(error)
    for part in ["alice", *re.split(r"[/?#,]", password)]:
        assert part not in str(error)


@pytest.mark.parametrize("servers", ["nats://h:port", "h:99999", "nats://u:p@h:x1"])
def test_a_port_that_is_no_number_is_refused(servers: str) -> None:
    with pytest.raises(jetstream.ClientValidationError, match="no valid port"):
        server_list(servers)


@pytest.mark.parametrize("servers", ["", " , ", [], [""], [b"nats://h"], 42, None])
def test_no_url_or_not_strings_is_refused(servers: object) -> None:
    with pytest.raises(jetstream.ClientValidationError):
        server_list(servers)  # type: ignore[arg-type]


def test_a_list_is_taken_as_given() -> None:
    assert server_list(["nats://a:x,y@h1:1", " h2:2 "]) == ["nats://a:x,y@h1:1", "h2:2"]
    assert server_list(("nats://h1:1",)) == ["nats://h1:1"]
