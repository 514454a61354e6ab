"""The ``$JS.API.*`` subjects, each stream and consumer name checked before it enters one."""

from __future__ import annotations

from .names import validate_name, validate_subject_token

__all__ = ["DEFAULT_API_PREFIX", "ApiSubjects"]

DEFAULT_API_PREFIX = "$JS.API"


class ApiSubjects:
    """The ``$JS.API.*`` subjects, under a prefix (``$JS.<domain>.API`` for a domain).

    Every stream and consumer name is checked with the server's rules before it becomes a
    subject token (:func:`~jetstream._protocol.names.validate_name`), so a name like ``>``,
    ``a.b`` or ``""`` raises :class:`InvalidNameError` at once and nothing is sent; every layer
    above builds its subjects here and inherits the check.
    """

    def __init__(self, prefix: str = DEFAULT_API_PREFIX) -> None:
        self.prefix = prefix.rstrip(".")

    def info(self) -> str:
        return f"{self.prefix}.INFO"

    def stream_create(self, stream: str) -> str:
        return f"{self.prefix}.STREAM.CREATE.{_stream(stream)}"

    def stream_update(self, stream: str) -> str:
        return f"{self.prefix}.STREAM.UPDATE.{_stream(stream)}"

    def stream_info(self, stream: str) -> str:
        return f"{self.prefix}.STREAM.INFO.{_stream(stream)}"

    def stream_delete(self, stream: str) -> str:
        return f"{self.prefix}.STREAM.DELETE.{_stream(stream)}"

    def stream_purge(self, stream: str) -> str:
        return f"{self.prefix}.STREAM.PURGE.{_stream(stream)}"

    def stream_names(self) -> str:
        return f"{self.prefix}.STREAM.NAMES"

    def msg_delete(self, stream: str) -> str:
        return f"{self.prefix}.STREAM.MSG.DELETE.{_stream(stream)}"

    def consumer_create(self, stream: str, name: str, filter_subject: str = "") -> str:
        """``CONSUMER.CREATE.<stream>.<name>[.<filter>]``; the filter form needs exactly one
        ``filter_subject`` in the config."""
        base = f"{self.prefix}.CONSUMER.CREATE.{_stream(stream)}.{_consumer(name)}"
        if not filter_subject:
            return base
        # Only what would break the line: kvstore sizes keys with a prefix ending in '.'.
        return f"{base}.{validate_subject_token(filter_subject, 'filter', tokens=False)}"

    def consumer_info(self, stream: str, name: str) -> str:
        return f"{self.prefix}.CONSUMER.INFO.{_stream(stream)}.{_consumer(name)}"

    def consumer_names(self, stream: str) -> str:
        return f"{self.prefix}.CONSUMER.NAMES.{_stream(stream)}"

    def consumer_delete(self, stream: str, name: str) -> str:
        return f"{self.prefix}.CONSUMER.DELETE.{_stream(stream)}.{_consumer(name)}"

    def consumer_unpin(self, stream: str, name: str) -> str:
        return f"{self.prefix}.CONSUMER.UNPIN.{_stream(stream)}.{_consumer(name)}"

    def consumer_pause(self, stream: str, name: str) -> str:
        return f"{self.prefix}.CONSUMER.PAUSE.{_stream(stream)}.{_consumer(name)}"

    def consumer_next(self, stream: str, name: str) -> str:
        return f"{self.prefix}.CONSUMER.MSG.NEXT.{_stream(stream)}.{_consumer(name)}"

    def msg_get(self, stream: str) -> str:
        return f"{self.prefix}.STREAM.MSG.GET.{_stream(stream)}"

    def direct_get(self, stream: str, subject: str | None = None) -> str:
        """``DIRECT.GET.<stream>`` (JSON body) or ``DIRECT.GET.<stream>.<subject>`` (empty body,
        last message of that subject)."""
        base = f"{self.prefix}.DIRECT.GET.{_stream(stream)}"
        return base if subject is None else f"{base}.{validate_subject_token(subject)}"


def _stream(name: str) -> str:
    return validate_name(name, "stream")


def _consumer(name: str) -> str:
    return validate_name(name, "consumer")
