"""Without ``--debug`` a library log record is one line on stderr, ``jetstore: LEVEL: message
(ErrorClass: text)``: nats-py logs some errors of its own with their traceback (a Ctrl-C racing
the end of ``put-many`` printed one), which only ``--debug`` shows."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

import pytest

from jetstore._output import setup_logging


@pytest.fixture(autouse=True)
def _root_logger_restored() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def _log_with_traceback() -> None:
    try:
        raise asyncio.InvalidStateError("invalid\nstate")
    except asyncio.InvalidStateError as exc:
        logging.getLogger("nats.aio.client").error("nats: encountered error", exc_info=exc)


def test_a_record_with_a_traceback_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    setup_logging(debug=False)
    _log_with_traceback()
    err = capsys.readouterr().err
    assert err == "jetstore: error: nats: encountered error (InvalidStateError: invalid state)\n"


def test_debug_shows_the_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    setup_logging(debug=True)
    _log_with_traceback()
    err = capsys.readouterr().err
    assert err.startswith("jetstore: error: nats: encountered error\nTraceback")
    assert "raise asyncio.InvalidStateError" in err
