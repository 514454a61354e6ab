"""The partitioned consumer group errors, built on the protocol tree in :mod:`jetstream`::

    JetStreamError
    ├── ClientValidationError (ValueError)
    │   ├── InvalidGroupConfigError          a config breaks orbit's rules (max_members, members
    │   │   │                                vs mappings, buffered limits)
    │   │   ├── InvalidPartitioningFilterError  empty filter, no wildcard, bad wildcard indexes
    │   │   └── InvalidMemberMappingError       mappings that do not cover each partition once
    │   ├── InvalidMemberConfigError         a member's ConsumerConfig template the server
    │   │                                    never accepts (push deliver_subject, ...)
    │   └── InvalidNameError
    │       └── InvalidGroupNameError        a stream, group or member name we cannot use
    ├── GroupNotFoundError                   no config for <stream>.<group> (or no bucket)
    ├── GroupExistsError                     a group of that name exists with another config
    ├── MemberNotFoundError                  step down of a name that is not a member
    ├── CorruptGroupConfigError              the stored value is not a valid orbit config
    ├── GroupDeletedError                    a consuming member's group was deleted
    ├── GroupConfigChangedError              its partitioning (static: its config) changed
    ├── MemberConsumerRefusedError           the server refused a member's consumer the same
    │                                        way 3 times in a row: the member ended
    └── GroupConfigMismatchError             the config's max_members or filters disagree with
                                             the stream's partitioning (messages would strand)

Validation errors are raised before anything is written.
"""

from __future__ import annotations

from jetstream import ClientValidationError, InvalidNameError, JetStreamError

__all__ = [
    "CorruptGroupConfigError",
    "GroupConfigChangedError",
    "GroupConfigMismatchError",
    "GroupDeletedError",
    "GroupExistsError",
    "GroupNotFoundError",
    "InvalidGroupConfigError",
    "InvalidGroupNameError",
    "InvalidMemberConfigError",
    "InvalidMemberMappingError",
    "InvalidPartitioningFilterError",
    "MemberConsumerRefusedError",
    "MemberNotFoundError",
]


class InvalidGroupConfigError(ClientValidationError):
    """A consumer group configuration breaks the rules orbit.go enforces (``max_members`` below
    1, both ``members`` and ``member_mappings`` given, negative buffered limits)."""


class InvalidPartitioningFilterError(InvalidGroupConfigError):
    """An elastic partitioning filter is empty, has neither a ``*`` token nor a trailing ``>``,
    or names partitioning wildcard indexes that are repeated or not among its ``*`` tokens."""


class InvalidMemberMappingError(InvalidGroupConfigError):
    """Member mappings do not assign each partition ``0 .. max_members-1`` to exactly one
    member, repeat a member, or have more mappings than partitions."""


class InvalidMemberConfigError(ClientValidationError):
    """A member's ``ConsumerConfig`` template is not one, or is one the server refuses for
    every consumer (a push ``deliver_subject``, more ``backoff`` steps than ``max_deliver``,
    a start position its ``deliver_policy`` does not take ...)."""


class InvalidGroupNameError(InvalidNameError):
    """A stream, group or member name that cannot be used in a KV key, a stream name or a
    consumer name (empty, ``.``, ``*``, ``>``, whitespace, ...)."""


class GroupNotFoundError(JetStreamError):
    """No configuration is stored for the group (its key or the whole bucket is missing)."""

    def __init__(self, stream: str, group: str, kind: str) -> None:
        super().__init__(f"no {kind} consumer group {group!r} on stream {stream!r}")
        self.stream = stream
        self.group = group


class GroupExistsError(JetStreamError):
    """A group of that name exists on the stream with a different configuration (orbit
    refuses to change it in place: delete and create again), or something else holds a
    name the group needs (``reason`` says what)."""

    def __init__(self, stream: str, group: str, kind: str, reason: str = "") -> None:
        super().__init__(
            f"the {kind} consumer group {group!r} on stream {stream!r} "
            + (reason or "exists with another configuration")
        )
        self.stream = stream
        self.group = group


class CorruptGroupConfigError(JetStreamError):
    """The stored configuration is not JSON orbit would accept, or breaks its rules."""


class MemberNotFoundError(JetStreamError):
    """The name is not a member of the group (neither in ``members`` nor in a mapping)."""

    def __init__(self, stream: str, group: str, member: str) -> None:
        super().__init__(f"{member!r} is not a member of group {group!r} on stream {stream!r}")
        self.stream = stream
        self.group = group
        self.member = member


class GroupDeletedError(JetStreamError):
    """The group's config was deleted (or purged, or the whole config bucket deleted) while a
    member consumed: the member ended."""

    def __init__(self, stream: str, group: str, kind: str) -> None:
        super().__init__(f"the {kind} consumer group {group!r} on stream {stream!r} was deleted")
        self.stream = stream
        self.group = group


class GroupConfigChangedError(JetStreamError):
    """The group's config changed in a way a running member cannot follow (elastic: the
    partitioning, ``max_members`` or buffered limits; static: anything, as orbit): the member
    ended. Start it again to consume under the new config."""

    def __init__(self, stream: str, group: str, kind: str, what: str) -> None:
        super().__init__(
            f"the {kind} consumer group {group!r} on stream {stream!r} changed its {what}"
        )
        self.stream = stream
        self.group = group


class MemberConsumerRefusedError(JetStreamError):
    """The server refused a member's consumer the same way three times in a row (a setting
    it never accepts: a limit of the stream or account, a config another client wrote that
    the server cannot serve, a setting an existing durable cannot change, the stream deleted
    ...): the member ended. ``stream`` is the stream of the member's consumer; ``code`` and
    ``err_code`` are the server's, ``description`` quotes its text; the server's error is the
    ``__cause__``."""

    def __init__(self, member: str, stream: str, refusal: JetStreamError) -> None:
        super().__init__(
            f"the server refuses the consumer of group member {member!r} on stream "
            f"{stream!r}: {refusal.description}",
            code=refusal.code,
            err_code=refusal.err_code,
        )
        self.member = member
        self.stream = stream


class GroupConfigMismatchError(JetStreamError):
    """The stored config does not match how the group's stream splits messages into
    partitions (``max_members`` or an elastic group's partitioning filters edited in the
    bucket after the group was made): members would leave partitions or subjects
    unprocessed without any error, so a member refuses to start. Make the group again
    (delete and create), or restore the config; :func:`elastic_status` /
    :func:`static_status` show what waits where."""

    def __init__(self, stream: str, group: str, kind: str, what: str) -> None:
        super().__init__(f"the {kind} consumer group {group!r} on stream {stream!r}: {what}")
        self.stream = stream
        self.group = group
