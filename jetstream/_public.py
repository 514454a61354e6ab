"""Showing a package's classes under the package's own name (``kvstore.Entry``, not
``kvstore._models.Entry``) without breaking introspection."""

from __future__ import annotations

import inspect
import sys
import typing

__all__ = ["show_as"]


def show_as(package: str, *classes: type) -> None:
    """Set each class's ``__module__`` to ``package``, resolving its string annotations first.

    With ``from __future__ import annotations`` the annotations are strings that
    ``inspect.signature``, ``help()`` and ``typing.get_type_hints`` evaluate in the namespace of
    ``__module__``; once that names the package, names imported only by the defining module
    (``datetime``, ``StreamInfo``) would raise ``NameError``. Resolved here, while the
    defining module is still known.
    """
    for cls in classes:
        defining = vars(sys.modules[cls.__module__])
        own = inspect.get_annotations(cls)
        resolved = typing.get_type_hints(cls, globalns=defining, include_extras=True)
        cls.__annotations__ = {name: resolved[name] for name in own}
        cls.__module__ = package
