"""The options every verb takes (connection, ``--json``, ``--quiet``, ``--debug``), accepted
anywhere on the line, as natscli takes its global flags: before the group
(``jetstore -s URL kv ls``), after it (``jetstore kv -s URL ls``) or among the verb's
arguments (``jetstore kv ls -s URL``).

Every group and every verb declares them; each records what the line gave in the context's
``meta`` (one dict shared by the nested contexts), and the verb reads them all once
(:func:`given_settings`). An option given twice with different values is a usage error
(natscli refuses a repeated flag too), never a silent choice between two servers or users.
The environment (``$NATS_URL`` ...) counts only when the line gives no value.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any, TypeVar

import click
from click.core import ParameterSource

from ._values import seconds

__all__ = ["DEFAULT_TIMEOUT", "given_settings", "shared_options", "with_shared_options"]

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_TIMEOUT = 5.0

_GIVEN = "jetstore.shared_options"


@dataclasses.dataclass(frozen=True)
class _Shared:
    name: str  # the field of Settings
    flags: tuple[str, ...]
    help: str
    envvar: str | None = None
    type: click.ParamType[Any] | None = None
    convert: Callable[[str], Any] | None = None  # after the type: e.g. "10s" to seconds
    is_flag: bool = False


_FILE = click.Path(exists=True, dir_okay=False)

_CONNECTION = (
    _Shared("server", ("--server", "-s"), "NATS URL(s), comma-separated [$NATS_URL].", "NATS_URL"),
    _Shared(
        "creds", ("--creds",), "User credentials (.creds) file [$NATS_CREDS].", "NATS_CREDS", _FILE
    ),
    _Shared("nkey", ("--nkey",), "NKey seed file [$NATS_NKEY].", "NATS_NKEY", _FILE),
    _Shared("user", ("--user",), "User name [$NATS_USER].", "NATS_USER"),
    _Shared("password", ("--password",), "Password [$NATS_PASSWORD].", "NATS_PASSWORD"),
    _Shared("token", ("--token",), "Authentication token [$NATS_TOKEN].", "NATS_TOKEN"),
    _Shared("tls_cert", ("--tlscert",), "TLS client certificate (PEM).", type=_FILE),
    _Shared("tls_key", ("--tlskey",), "TLS client key (PEM).", type=_FILE),
    _Shared("tls_ca", ("--tlsca",), "CA certificate(s) to verify the server (PEM).", type=_FILE),
    _Shared(
        "timeout",
        ("--timeout",),
        f"Seconds (or 500ms, 10s) to wait for the server, connect and each request "
        f"[default: {DEFAULT_TIMEOUT:g}].",
        convert=seconds,
    ),
)

_OUTPUT = (
    _Shared(
        "json", ("--json",), "Machine-readable JSON output (fields in docs/CLI.md).", is_flag=True
    ),
    _Shared(
        "quiet", ("--quiet", "-q"), "No progress bars or result lines; errors only.", is_flag=True
    ),
    _Shared("debug", ("--debug",), "Tracebacks and library debug logs on stderr.", is_flag=True),
)


_BY_NAME = {shared.name: shared for shared in (*_CONNECTION, *_OUTPUT)}


def _record(ctx: click.Context, param: click.Parameter, value: Any) -> None:
    """Note what the line gave for this option at this level (defaults are not given)."""
    assert param.name is not None
    if ctx.get_parameter_source(param.name) is not ParameterSource.COMMANDLINE:
        return
    values = list(value) if param.multiple else [value]
    convert = _BY_NAME[param.name].convert
    if convert is not None:
        values = [convert(text) for text in values]
    ctx.meta.setdefault(_GIVEN, {}).setdefault(param.name, []).extend(values)


def _declarations(*, connects: bool, hidden: bool) -> list[tuple[list[str], dict[str, Any]]]:
    """Each shared option's names and settings, for click.Option or click.option. A verb
    that connects to nothing (``connects`` False) declares the connection options hidden, to
    refuse them by name wherever they stand."""
    declarations = []
    for shared in (*_CONNECTION, *_OUTPUT):
        if shared.is_flag:
            kind: dict[str, Any] = {"is_flag": True}
        else:  # every use is kept, so a second one with another value can be refused
            metavar = {"server": "URL", "timeout": "SECONDS"}.get(shared.name)
            kind = {"multiple": True, "type": shared.type, "metavar": metavar}
        shown = not hidden and (connects or shared in _OUTPUT)
        settings = {"help": shared.help, "hidden": not shown, "expose_value": False, **kind}
        declarations.append(([*shared.flags, shared.name], {**settings, "callback": _record}))
    return declarations


def shared_options(*, hidden: bool = False) -> list[click.Option]:
    """The shared options for a group (the connection options, then ``--json``, ``--quiet``,
    ``--debug``); ``hidden`` from its help."""
    return [
        click.Option(names, **settings)
        for names, settings in _declarations(connects=True, hidden=hidden)
    ]


def with_shared_options(function: F, *, connects: bool) -> F:
    """``function`` (a verb's callback) with the shared options after its own."""
    for names, settings in reversed(_declarations(connects=connects, hidden=False)):
        function = click.option(*names, **settings)(function)
    return function


def given_settings(ctx: click.Context, *, connects: bool) -> dict[str, Any]:
    """What the shared options of this invocation say, wherever on the line they were given,
    as keyword arguments of ``Settings``; the environment fills in what the line leaves out.

    Raises:
        click.UsageError: an option given twice with different values; a connection option
            for a verb that connects to nothing (``server``).
        click.BadParameter: an environment variable naming a file that does not exist.
    """
    given: dict[str, list[Any]] = ctx.meta.get(_GIVEN, {})
    settings: dict[str, Any] = {}
    for shared in _CONNECTION:
        values = given.get(shared.name, [])
        if values and not connects:
            raise click.UsageError(
                f"`{ctx.command_path}` connects to no server: it takes no {shared.flags[0]}", ctx
            )
        if len(set(values)) > 1:  # the values are never shown: they may be secrets
            raise click.UsageError(
                f"{shared.flags[0]} given twice with different values: give it once", ctx
            )
        if values:
            settings[shared.name] = values[0]
        elif connects and shared.envvar and os.environ.get(shared.envvar):
            settings[shared.name] = _from_environment(ctx, shared, os.environ[shared.envvar])
    for shared in _OUTPUT:
        settings[shared.name] = bool(given.get(shared.name))
    return settings


def _from_environment(ctx: click.Context, shared: _Shared, text: str) -> Any:
    if shared.type is None:
        return text
    try:
        return shared.type.convert(text, None, ctx)
    except click.BadParameter as exc:
        exc.param_hint = f"${shared.envvar}"
        raise
