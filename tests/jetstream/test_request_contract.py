"""The part of nats-py's request path ``jetstream._transport.requests.send`` calls
directly: nats-py's ``request()`` is ``_request_new_style`` followed by a check that takes
any reply with a ``Status: 503`` header for "no responders", also a direct get answering a value
another client stored with that header. These fail when a nats-py release changes that
shape."""

from __future__ import annotations

import inspect

from nats.aio.client import Client


def test_request_new_style_keeps_its_signature() -> None:
    params = list(inspect.signature(Client._request_new_style).parameters)
    assert params == ["self", "subject", "payload", "timeout", "headers"]
    assert inspect.iscoroutinefunction(Client._request_new_style)


def test_request_is_request_new_style_plus_the_status_check() -> None:
    source = inspect.getsource(Client.request)
    assert "self._request_new_style(" in source
    assert "NoRespondersError" in source  # the only step send() replaces


def test_publish_still_validates_the_subject_request_checked_first() -> None:
    assert "_validate_subject(subject)" in inspect.getsource(Client.publish)


def test_the_shared_reply_inbox_is_resp_sub_prefix_and_a_wildcard() -> None:
    """``JetStream._reply_inbox_refused`` matches a refused subscription against it."""
    source = inspect.getsource(Client._init_request_sub)
    assert "resp_mux_subject = self._resp_sub_prefix[:]" in source
    assert 'resp_mux_subject.extend(b"*")' in source
