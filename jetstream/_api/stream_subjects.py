"""The subjects a stream holds messages on (``STREAM.INFO`` with ``subjects_filter``, paged).

Lists keys without reading their messages: the server keeps a per-subject index, and answers
up to 100,000 subjects per page.
"""

from __future__ import annotations

import msgspec

from .._errors import ClientValidationError
from .._protocol.names import validate_subject_token
from .client import ApiClient

__all__ = ["stream_subjects"]


class _SubjectsState(msgspec.Struct):
    subjects: dict[str, int] | None = None


class _SubjectsPage(msgspec.Struct):
    """The part of a stream info reply that pages through subjects."""

    state: _SubjectsState
    total: int = 0
    offset: int = 0


async def stream_subjects(js: ApiClient, stream: str, filters: list[str]) -> list[str]:
    """The subjects matching any of ``filters`` (wildcards allowed) that ``stream`` holds at
    least one message on now, sorted and without repeats.

    Raises:
        ClientValidationError: an invalid stream name, ``filters`` given as one string instead
            of a list, or a filter that is empty, has whitespace or an empty token; nothing
            is sent.
        StreamNotFoundError: no such stream.
        JetStreamError: a request failed.
    """
    patterns = _checked(filters)
    found: set[str] = set()
    for pattern in patterns:
        offset = 0
        while True:
            body = msgspec.json.encode({"subjects_filter": pattern, "offset": offset})
            subject = js.api.stream_info(stream)
            page = await js.request(subject, body, _SubjectsPage, idempotent=True)
            subjects = page.state.subjects or {}
            found.update(subjects)
            offset += len(subjects)
            if not subjects or offset >= page.total:
                break
    return sorted(found)


def _checked(filters: list[str]) -> list[str]:
    # A lone string would be iterated character by character, each a valid one-token filter.
    if isinstance(filters, str):
        raise ClientValidationError(
            f"filters must be a list of subjects, not a string: {filters!r}"
        )
    return [validate_subject_token(f, "subject filter") for f in dict.fromkeys(filters)]
