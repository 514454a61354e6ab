"""A member's ``ConsumerConfig`` template, checked against the rules the server applies to
every consumer (nats-server ``checkConsumerCfg``): a template it would always refuse is
refused at once, before anything is sent, instead of the member retrying its join for good.
The fields the member sets itself (names, filters, priority group, ``ack_wait``, elastic
``ack_policy`` and ``inactive_threshold``) are not the caller's. Limits only the server
knows (the stream's or account's ``max_ack_pending``, replicas) are left to it: a refusal it
repeats ends the member (:class:`MemberConsumerRefusedError`). No I/O.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Final

from jetstream import ConsumerConfig

from ._errors import InvalidMemberConfigError

__all__ = ["checked_template"]

_MAX_DESCRIPTION: Final = 4 * 1024  # server JSMaxDescriptionLen
_MAX_METADATA: Final = 128 * 1024  # server JSMaxMetadataLen (keys and values)
_MIN_EXPIRES: Final = timedelta(milliseconds=1)
_SAMPLE: Final = re.compile(r"\d+%?")
_STARTS: Final = {  # deliver policy: (start sequence needed, start time needed)
    "all": (False, False),
    "last": (False, False),
    "new": (False, False),
    "last_per_subject": (False, False),
    "by_start_sequence": (True, False),
    "by_start_time": (False, True),
}


def checked_template(config: ConsumerConfig | None) -> ConsumerConfig:
    """``config`` (explicit acks when None), after the rules the server always applies.

    Raises:
        InvalidMemberConfigError: not a ConsumerConfig, or one the server refuses for any
            consumer of a member (push ``deliver_subject``, more ``backoff`` steps than
            ``max_deliver``, a start sequence or time its ``deliver_policy`` does not take,
            a bad ``sample_freq``, ``max_expires`` under 1 ms, a description or metadata over
            the server's sizes).
    """
    if config is None:
        return ConsumerConfig(ack_policy="explicit")
    if not isinstance(config, ConsumerConfig):
        raise InvalidMemberConfigError(f"config must be a ConsumerConfig, not {config!r}")
    for problem in (_delivery(config), _redelivery(config), _start(config), _sizes(config)):
        if problem:
            raise InvalidMemberConfigError(f"the member's consumer config: {problem}")
    return config


def _delivery(config: ConsumerConfig) -> str:
    if config.deliver_subject:
        return (
            f"deliver_subject {config.deliver_subject!r} makes a push consumer, and members "
            "pull (a priority group cannot be pushed)"
        )
    expires = config.max_expires
    if expires is not None and expires < _MIN_EXPIRES:
        return f"max_expires must be at least 1 ms, not {expires}"
    if config.replay_policy not in ("instant", "original"):
        return f"unknown replay_policy {config.replay_policy!r}"
    if config.sample_freq and not _SAMPLE.fullmatch(config.sample_freq):
        return f"sample_freq must be a percentage like '30%', not {config.sample_freq!r}"
    return ""


def _redelivery(config: ConsumerConfig) -> str:
    steps = len(config.backoff or ())
    if steps and config.max_deliver > 0 and steps > config.max_deliver:
        return (
            f"max_deliver ({config.max_deliver}) must be at least the number of backoff steps "
            f"({steps})"
        )
    return ""


def _start(config: ConsumerConfig) -> str:
    policy = config.deliver_policy
    if policy not in _STARTS:
        return f"unknown deliver_policy {policy!r}"
    needs_sequence, needs_time = _STARTS[policy]
    has_sequence, has_time = config.opt_start_seq > 0, config.opt_start_time is not None
    if has_sequence != needs_sequence:
        verb = "needs" if needs_sequence else "takes no"
        return f"deliver_policy {policy!r} {verb} opt_start_seq"
    if has_time != needs_time:
        verb = "needs" if needs_time else "takes no"
        return f"deliver_policy {policy!r} {verb} opt_start_time"
    return ""


def _sizes(config: ConsumerConfig) -> str:
    size = len(config.description.encode())
    if size > _MAX_DESCRIPTION:
        return f"a description of {size} bytes (at most {_MAX_DESCRIPTION})"
    metadata = config.metadata or {}
    size = sum(len(k.encode()) + len(v.encode()) for k, v in metadata.items())
    if size > _MAX_METADATA:
        return f"metadata of {size} bytes (at most {_MAX_METADATA})"
    return ""
