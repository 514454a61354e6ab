"""Values out of reprs: an object holding a value's bytes (a KV entry, a stored message, an
upload item) shows their size, never the bytes. Programs log and print such objects, and the
bytes may be a secret, plain or decrypted; which key, revision or subject they belong to is
what a log needs."""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["PayloadHidden", "PayloadSize"]


class PayloadSize:
    """What a repr shows in place of a payload: ``<N bytes>`` (``<1 byte>``)."""

    __slots__ = ("size",)

    def __init__(self, payload: bytes | bytearray | memoryview) -> None:
        self.size = len(payload)

    def __repr__(self) -> str:
        return f"<{self.size} byte{'' if self.size == 1 else 's'}>"


class PayloadHidden:
    """Mixin for a msgspec Struct or a dataclass (``repr=False``) with one field of value
    bytes, named by ``_payload``: ``repr`` and rich's pretty printer (``__rich_repr__``, which
    both support) show every field as usual and that one as its size (None stays None)."""

    __slots__ = ()
    _payload = ""  # set by each class; no annotation: show_as() resolves those in its module

    def __rich_repr__(self) -> list[tuple[str, Any]]:
        return [(name, self._shown(name)) for name in _field_names(type(self))]

    def _shown(self, name: str) -> Any:
        value = getattr(self, name)
        return PayloadSize(value) if name == self._payload and value is not None else value

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={value!r}" for name, value in self.__rich_repr__())
        return f"{type(self).__name__}({fields})"


def _field_names(cls: type) -> tuple[str, ...]:
    names: tuple[str, ...] | None = getattr(cls, "__struct_fields__", None)
    if names is None:  # a dataclass
        names = tuple(field.name for field in dataclasses.fields(cls))
    return names
