"""``jetstore cg static|elastic consume``: join a group as a member and print what it
receives, acknowledging each message once printed."""

from __future__ import annotations

import contextlib
from datetime import timedelta

import click

import jetstream
import pcgroups

from ._cg_fields import message_fields
from ._cg_kinds import Kind
from ._connect import Settings, run, verb
from ._output import emit_json_line
from ._shown import shown, shown_value
from ._values import duration_option

__all__ = ["ack_options", "consume_verb", "consumer_template", "waiting_note"]


def consumer_template(ack_wait: timedelta | None, max_ack_pending: int) -> jetstream.ConsumerConfig:
    """The member's consumer template (pcgroups sets names, filters and the pin)."""
    return jetstream.ConsumerConfig(
        ack_policy="explicit",
        ack_wait=jetstream.Duration.of(ack_wait),
        max_ack_pending=max_ack_pending,
    )


def waiting_note(member: str, partitions: tuple[int, ...], quiet: bool) -> None:
    """Say on stderr that a member owns nothing yet (else it would look hung)."""
    if not partitions and not quiet:
        click.echo(f"jetstore: {member} owns no partition (yet): waiting", err=True)


def ack_options(function: click.decorators.FC) -> click.decorators.FC:
    options = [
        click.option("--count", type=click.IntRange(min=1), help="Stop after this many."),
        click.option(
            "--ack/--no-ack",
            default=True,
            show_default=True,
            help="Acknowledge each once printed; --no-ack gives them back at the end "
            "(to look without consuming).",
        ),
        click.option(
            "--ack-wait",
            callback=duration_option,
            help="Redelivery after this long without an ack; also the pin timeout [5s].",
        ),
        click.option(
            "--max-ack-pending",
            type=click.IntRange(min=1),
            default=1,
            show_default=True,
            help="Messages in flight (1 keeps each key in order across a takeover).",
        ),
        click.option(
            "--confirm-acks",
            is_flag=True,
            help="Each ack waits until the server has applied it (it survives a crash of the "
            "server; a round trip each).",
        ),
    ]
    for option in reversed(options):
        function = option(function)
    return function


def consume_verb(kind: Kind) -> click.Command:
    """``jetstore cg <kind> consume STREAM GROUP MEMBER``."""

    @click.command("consume")
    @click.argument("stream")
    @click.argument("group")
    @click.argument("member")
    @ack_options
    @verb
    def consume(
        settings: Settings,
        stream: str,
        group: str,
        member: str,
        count: int | None,
        ack: bool,
        ack_wait: timedelta | None,
        max_ack_pending: int,
        confirm_acks: bool,
    ) -> None:
        """Consume as MEMBER: a line `partition subject: data` per message (--json: one
        object per line), until Ctrl-C, --count, or the group is deleted or changed (exit 1)."""
        template = consumer_template(ack_wait, max_ack_pending)

        async def work(js: jetstream.JetStream) -> None:
            running = kind.consume(
                js, stream, group, member, config=template, confirm_acks=confirm_acks
            )
            unacked: list[pcgroups.GroupMessage] = []
            try:
                async with running:
                    waiting_note(member, running.partitions, settings.quiet)
                    seen = 0
                    async for message in running:
                        _print(message, settings)
                        if ack:
                            await message.ack()
                        else:
                            unacked.append(message)
                        seen += 1
                        if count is not None and seen >= count:
                            break
            finally:  # once stopped: nak'ed while our pull waited, it would come back to it
                await _give_back(unacked)

        run(settings, work, interrupt_ok=True)

    return consume


def _print(message: pcgroups.GroupMessage, settings: Settings) -> None:
    if settings.json:
        emit_json_line(message_fields(message))
    elif not settings.quiet:
        click.echo(f"{message.partition} {shown(message.subject)}: {shown_value(message.data)}")


async def _give_back(messages: list[pcgroups.GroupMessage]) -> None:
    """Nak what was printed but not acknowledged (``--no-ack``): redelivered at once rather
    than after ``ack_wait``."""
    with contextlib.suppress(jetstream.JetStreamError):
        for message in messages:
            await message.nak()
