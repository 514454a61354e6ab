"""ADR-42 priority groups on the pulling side: the group a consumer's pulls name and the pin
id the server gave them (``pinned_client`` policy).

Facts seen on nats-server 2.15.1 (docs/PCGROUPS-WIRE.md, "Server facts"): the first pull of a
group without a pinned client is pinned, and every message it gets carries the pin in
``Nats-Pin-Id`` (heartbeats and 408s do not); pulls of other clients (no ``id``) wait; a pull
with a stale ``id`` is answered ``423``; the pin is released when the pinned client sends no
pull for ``priority_timeout`` (its waiting pull does not keep it), or by the unpin API.
"""

from __future__ import annotations

from .. import headers as hdr
from .._protocol.names import validate_priority_group

__all__ = ["PriorityPin"]


class PriorityPin:
    """The priority group of a consumer's pulls and the pin id they carry ("" = none yet)."""

    __slots__ = ("group", "id")

    def __init__(self, group: str) -> None:
        self.group = validate_priority_group(group)
        self.id = ""

    def fields(self) -> dict[str, str]:
        """What a pull request adds: ``group``, and ``id`` once pinned."""
        return {"group": self.group, "id": self.id} if self.id else {"group": self.group}

    def seen(self, headers: dict[str, str] | None) -> None:
        """A delivered message: keep the pin it carries (the server may have pinned anew)."""
        if headers:
            pin = headers.get(hdr.PIN_ID)
            if pin:
                self.id = pin

    def lost(self) -> None:
        """A 423: the pin is another client's now (or expired); pull without it."""
        self.id = ""
