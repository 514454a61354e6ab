"""docs/CLI.md's "From natscli and orbit" tables hold what they claim: every row's first
column is a real natscli or orbit ``cg`` command (their verbs as natscli c778a5c and orbit.go
873426d define them), and every jetstore command of the second column reaches a jetstore verb
that takes the options it shows."""

from __future__ import annotations

import re

import click
import pytest

from tests.cli.cli_helpers import ROOT

# natscli cli/kv_command.go and cli/object_command.go (`object` has the alias `obj`); orbit.go
# pcgroups/cg/main.go: each verb with its aliases.
_NATSCLI = {
    "kv": {
        *("add", "new", "edit", "put", "get", "create", "update", "del", "rm", "purge"),
        *("history", "revert", "info", "view", "status", "watch", "ls", "list", "compact"),
    },
    "obj": {"add", "edit", "put", "del", "rm", "get", "info", "show", "i", "ls", "seal", "watch"},
}
_NATSCLI["object"] = _NATSCLI["obj"]
_ORBIT_SHARED = {
    *("prompt", "ls", "list", "info", "create", "delete", "rm", "member-info", "memberinfo"),
    *("minfo", "step-down", "stepdown", "sd", "consume", "join"),
}
_ORBIT = {
    "static": _ORBIT_SHARED,
    "elastic": {
        *_ORBIT_SHARED,
        *("add", "drop", "create-mapping", "cm", "createmapping", "delete-mapping", "dm"),
        "deletemapping",
    },
}

_CODE = re.compile(r"`([^`]+)`")


def _rows() -> list[list[str]]:
    text = (ROOT / "docs" / "CLI.md").read_text()
    section = text.split("\n## From natscli and orbit\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return [[cell.strip() for cell in re.split(r"(?<!\\)\|", row)[1:-1]] for row in rows]


def _words(command: str) -> list[str]:
    """The command's words, options and placeholders (``URL``, ``M:P,P...``) left out."""
    return [w for w in command.split() if not w.startswith("-") and not _placeholder(w)]


def _placeholder(word: str) -> bool:
    return word.upper() == word or word == "..."


def _theirs(command: str, row: str) -> None:
    words = _words(command)
    tool = words.pop(0) if words[0] in ("nats", "cg") else None
    table = _ORBIT if tool == "cg" or (tool is None and words[0] in _ORBIT) else _NATSCLI
    assert words[0] in table, (row, command)
    if len(words) > 1:  # `nats object ...` names the group only
        assert words[1] in table[words[0]], (row, command)


def test_every_row_starts_with_a_natscli_or_orbit_command() -> None:
    rows = _rows()
    assert len(rows) > 40
    for cells in rows:
        first, *aliases = _CODE.findall(cells[0])
        assert first.startswith(("nats ", "cg ")), cells[0]
        _theirs(first, cells[0])
        group = _words(first)[1]
        for alias in aliases:  # (`kv new`), (`list`): in the row's group, or a whole command
            _theirs(alias if " " in alias else f"{group} {alias}", cells[0])


def _reach(command: str) -> tuple[click.Command, list[click.Group]]:
    """The verb of a jetstore command line (a group for ``--help`` or a line ending in
    ``...``), and the groups that lead to it; its options checked."""
    from jetstore._app import cli

    reached: click.Command = cli
    path: list[click.Command] = [cli]
    options: list[str] = []
    with click.Context(cli) as ctx:
        for word in command.split()[1:]:
            if word.startswith("-"):
                options.append(word.split("=", 1)[0])
            elif isinstance(reached, click.Group) and not _placeholder(word):
                found = reached.get_command(ctx, word)
                assert found is not None, (command, word)
                reached = found
                path.append(found)
    ends_at_group = options == ["--help"] or command.endswith("...")
    assert ends_at_group or not isinstance(reached, click.Group), command
    known = {opt for c in path for p in c.params for opt in (*p.opts, *p.secondary_opts)}
    assert set(options) - {"--help"} <= known, (command, set(options) - known)
    return reached, [c for c in path if isinstance(c, click.Group) and c is not reached]


def _alias_reaches(alias: str, verb: click.Command, groups: list[click.Group]) -> bool:
    """``alias`` (``kv new``: from the top; ``cm``: in one of ``groups``) names ``verb``."""
    if " " in alias:
        return _reach(f"jetstore {alias}")[0] is verb
    with click.Context(groups[0]) as ctx:
        return any(group.get_command(ctx, alias) is verb for group in groups)


@pytest.mark.parametrize("cells", _rows(), ids=lambda cells: _CODE.findall(cells[0])[0])
def test_every_jetstore_command_of_the_table_is_a_verb_with_those_options(
    cells: list[str],
) -> None:
    if cells[1].startswith("none"):
        return  # a usage error names what to use: tests/cli/test_cli_natscli_habits.py
    first, *others = _CODE.findall(cells[1])
    for command in [*first.split("\\|"), *others]:
        if command.strip().startswith("jetstore"):
            _reach(command.strip())
    verb, groups = _reach(first.split("\\|")[0].strip())
    for alias in others:
        if not alias.startswith("jetstore"):
            assert _alias_reaches(alias, verb, groups), (alias, cells[1])
