"""natscli's and orbit's spellings, where they mean what one of ours does, and a usage error
that names ours where they do not.

:class:`VerbGroup` is every group of the command line. It takes the shared options before its
verb (:mod:`jetstore._shared_options`), answers to natscli's (or orbit's) name of one of its
verbs (``aliases``: ``kv status`` is ``kv info``), to a name it knows but has no verb for
(``not_ours``: ``kv revert``) with a usage error that says what to use, and to any other name
with the verbs it has. :func:`explained` turns click's "No such option" into a line that says
where the option goes (a verb's option given before the verb) or what to use instead (natscli's
flags jetstore does not take).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, MutableMapping
from typing import Any, TypeVar

import click

from ._shared_options import shared_options

FC = TypeVar("FC", bound=Callable[..., Any] | click.Command)

__all__ = ["VerbGroup", "explained", "positionals", "unlisted_arguments"]

# natscli's global flags jetstore does not take, and what to use instead.
_GLOBAL_FLAGS = {
    "--context": "natscli's contexts are not read: give --server (or $NATS_URL), --creds, "
    "--user/--password, --token or --tls* on the line",
    "--no-context": "natscli's contexts are never read: give --server (or $NATS_URL)",
    **dict.fromkeys(("--jwt", "--seed"), "give the JWT and its seed as one --creds FILE"),
    "--trace": "--debug shows the library's log, with tracebacks",
    **dict.fromkeys(
        ("--tlsfirst", "--tls-first"),
        "a TLS handshake before the server's greeting is not supported",
    ),
    **dict.fromkeys(
        ("--js-domain", "--domain", "--js-api-prefix", "--js-event-prefix"),
        "JetStream domains and API prefixes are not supported",
    ),
    **dict.fromkeys(
        ("--connection-name", "--inbox-prefix", "--socks-proxy", "--colors"),
        "jetstore does not support this natscli option",
    ),
}

_KEY_DETAILS = (
    "`jetstore kv ls BUCKET` prints the keys only: `jetstore kv get BUCKET KEY --json` shows a "
    "key's revision and time, `jetstore kv history BUCKET KEY` every revision"
)
_BARS = "bars are drawn only when stderr is a terminal; --quiet leaves them out"
_SLEEP = "orbit's simulated processing time: `jetstore cg KIND consume` has none"
_PLACEMENT = "placement, republishing, mirrors and sources are not supported by jetstore"
_NATSCLI_CONFIG = (
    "--tags", "--cluster", "--republish-source", "--republish-destination",
    "--republish-headers", "--mirror", "--mirror-domain", "--source",
)  # fmt: skip

# (verb, option) -> what to use instead, for natscli's verb flags jetstore does not take.
_VERB_FLAGS = {
    **dict.fromkeys((("kv ls", o) for o in ("-v", "--verbose", "--display-value")), _KEY_DETAILS),
    **dict.fromkeys(
        ((verb, o) for verb in ("obj put", "obj get") for o in ("--progress", "--no-progress")),
        _BARS,
    ),
    **dict.fromkeys(
        (("obj put", o) for o in ("-H", "--header")),
        ("object headers are not supported: --meta NAME=VALUE stores metadata"),
    ),
    ("obj put", "--chunk-size"): "the chunk size is not an option of `jetstore obj put`",
    **dict.fromkeys(
        ((verb, o) for verb in ("kv add", "obj add") for o in _NATSCLI_CONFIG), _PLACEMENT
    ),
    ("cg static", "--sleep"): _SLEEP,
    ("cg elastic", "--sleep"): _SLEEP,
}


class _Unlisted(click.Argument):
    """Arguments in natscli's shape that a verb takes without showing them in its usage line
    (its help says so): `kv update`'s REVISION after the value, and `kv rm`'s KEY, refused
    with a message naming `kv del`."""

    def get_usage_pieces(self, ctx: click.Context) -> list[str]:
        return []


def unlisted_arguments(name: str) -> Callable[[FC], FC]:
    """Any number of further arguments, as ``name`` (a tuple), left out of the usage line."""
    return click.argument(name, nargs=-1, cls=_Unlisted)


class VerbGroup(click.Group):
    """A group of verbs that also takes the shared options and answers to natscli's names.

    ``aliases`` maps another name to one of ours (a path such as ``"mappings set"`` reaches a
    verb of a subgroup); ``not_ours`` maps a name we have no verb for to what to use instead;
    ``habits_of`` names whose names the aliases are (shown in the help).
    """

    def __init__(
        self,
        name: str | None = None,
        commands: MutableMapping[str, click.Command] | None = None,
        *,
        aliases: Mapping[str, str] | None = None,
        not_ours: Mapping[str, str] | None = None,
        habits_of: str = "natscli",
        show_shared: bool = False,
        **attrs: Any,
    ) -> None:
        super().__init__(name, commands, **attrs)
        self.aliases = dict(aliases or {})
        self.not_ours = dict(not_ours or {})
        self.params.extend(shared_options(hidden=not show_shared))
        if self.aliases and self.epilog is None:
            self.epilog = f"{habits_of}'s names work too: {_alias_list(self.aliases)}."

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        first, *rest = self.aliases.get(cmd_name, cmd_name).split()
        command = self.own_command(ctx, first)
        for part in rest:
            assert isinstance(command, click.Group), "an alias path leads through groups"
            command = command.get_command(ctx, part)
        return command

    def own_command(self, ctx: click.Context, name: str) -> click.Command | None:
        """The verb called ``name`` here (not an alias)."""
        return super().get_command(ctx, name)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0]
        if not name.startswith("-") and self.get_command(ctx, name) is None:
            if name in self.not_ours:
                raise click.UsageError(self.not_ours[name], ctx)
            verbs = ", ".join(self.list_commands(ctx))
            raise click.UsageError(f"no verb {name!r}: {ctx.command_path} has {verbs}", ctx)
        return super().resolve_command(ctx, args)


def positionals(command: click.Command, args: list[str]) -> list[int]:
    """Where in ``args`` (a verb's part of the line) its positional arguments stand: every
    token that is neither an option of ``command`` nor the value an option takes."""
    takes_value = {
        flag
        for param in command.params
        if isinstance(param, click.Option) and not param.is_flag and not param.count
        for flag in param.opts
    }
    found: list[int] = []
    index = 0
    while index < len(args):
        token = args[index]
        if token == "--":
            return found + list(range(index + 1, len(args)))
        if token in takes_value:
            index += 1  # its value
        elif not token.startswith("-") or token == "-":
            found.append(index)
        index += 1
    return found


def _alias_list(aliases: Mapping[str, str]) -> str:
    by_verb: dict[str, list[str]] = {}
    for alias, verb in aliases.items():
        by_verb.setdefault(verb, []).append(alias)
    return "; ".join(f"{', '.join(names)} ({verb})" for verb, names in by_verb.items())


def explained(error: click.NoSuchOption) -> str:
    """click's "No such option" message, saying what to use instead when the option is a
    natscli flag we know, and where the option goes when it is an option of a verb given
    before that verb (``jetstore kv --raw get``)."""
    option = error.option_name.partition("=")[0]
    ctx = error.ctx
    hint = _GLOBAL_FLAGS.get(option)
    if hint is None and ctx is not None:
        hint = _VERB_FLAGS.get((_verb_name(ctx), option))
    if hint is not None:
        return f"no option {option}: {hint}"
    if ctx is not None and isinstance(ctx.command, click.Group):
        owners = sorted(set(_verbs_taking(ctx.command, ctx, option, ctx.command_path)))
        if owners:
            return f"{option} is an option of {', '.join(owners)}: give it after the verb"
    return error.format_message()


def _verb_name(ctx: click.Context) -> str:
    """The verb's canonical path without the program (``kv ls`` for ``jetstore kv list``)."""
    names = []
    while ctx.parent is not None:
        names.append(ctx.command.name or "")
        ctx = ctx.parent
    return " ".join(reversed(names))


def _verbs_taking(group: click.Group, ctx: click.Context, option: str, path: str) -> Iterator[str]:
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if isinstance(command, click.Group):
            yield from _verbs_taking(command, ctx, option, f"{path} {name}")
        elif command is not None and any(
            option in (*p.opts, *p.secondary_opts) for p in command.params
        ):
            yield f"`{path} {name}`"
