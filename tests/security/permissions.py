"""Server configurations for the security tests: users with the library's permission templates
(``kvstore.reader_permissions`` & co, documented in docs/SECURITY.md), each with its own inbox."""

from __future__ import annotations

import json

import jetstream


def inbox(user: str) -> str:
    """The inbox prefix a user connects with (``inbox_prefix=``) and may subscribe to."""
    return f"_INBOX_{user}"


def server_config(users: dict[str, jetstream.Permissions | None]) -> str:
    """An ``authorization`` block: password = ``<user>-pw``; None = no restrictions (admin)."""
    entries = []
    for name, permissions in users.items():
        entry: dict[str, object] = {"user": name, "password": f"{name}-pw"}
        if permissions is not None:
            entry["permissions"] = permissions.as_config()
        entries.append(entry)
    return "authorization {\n  users = " + json.dumps(entries, indent=2) + "\n}\n"
