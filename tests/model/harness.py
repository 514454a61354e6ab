"""Machinery shared by the model-based tests: a real server behind a proxy, fault injection,
a recorder that runs each operation under its documented bound, and an independent reader of
what the stream really holds (raw JetStream API requests, not the library under test)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import jetstream
from tests.proxy import TcpProxy

from .history import History, Step

# Client settings of every model history: short request timeouts so that faults resolve in
# seconds, and a retry deadline that outlasts the longest fault a history injects.
REQUEST_TIMEOUT = 2.0
RETRY_DEADLINE = 12.0
COMMIT_DEADLINE = 12.0
STALL_TIMEOUT = 6.0
# No call may take longer than this: its own deadline plus the longest fault (a pause of
# 1.5 s or a restart) plus scheduling slack on a loaded 2-core machine.
CALL_BOUND = RETRY_DEADLINE + 18.0

FAULT_KINDS = ("pause", "kill", "cut")


@dataclass
class Call:
    """One operation of a history as the client saw it."""

    op_id: int
    task: int
    kind: str
    args: dict[str, Any]
    start: float = 0.0
    end: float = 0.0
    result: Any = None
    error: BaseException | None = None
    cancelled: bool = False  # the history cancelled it (it may still have completed)
    hung: bool = False  # it outlived CALL_BOUND

    @property
    def ok(self) -> bool:
        return self.error is None and not self.hung

    def describe(self) -> str:
        outcome = (
            "HUNG"
            if self.hung
            else f"raised {type(self.error).__name__}: {self.error}"
            if self.error is not None
            else f"-> {self.result!r}"[:200]
        )
        cancel = " (cancelled)" if self.cancelled else ""
        return f"#{self.op_id} task {self.task} {self.kind}({self.args}){cancel} {outcome}"


@dataclass
class Recorder:
    """Runs operations and keeps a :class:`Call` for each, with monotonic start and end."""

    calls: list[Call] = field(default_factory=list)
    _ids: int = 0

    def new_call(self, task: int, kind: str, args: dict[str, Any]) -> Call:
        self._ids += 1
        call = Call(self._ids, task, kind, dict(args))
        self.calls.append(call)
        return call

    async def run(
        self,
        call: Call,
        operation: Callable[[], Awaitable[Any]],
        *,
        cancel_after: float | None = None,
        bound: float = CALL_BOUND,
    ) -> Call:
        """Run ``operation``; cancel it after ``cancel_after`` seconds when given; mark the
        call hung (and cancel it) if it is still running after ``bound`` seconds."""
        call.start = time.monotonic()
        task = asyncio.ensure_future(operation())
        if cancel_after is not None:
            done, _ = await asyncio.wait({task}, timeout=cancel_after)
            if not done:
                call.cancelled = True
                task.cancel()
        done, _ = await asyncio.wait({task}, timeout=bound)
        call.end = time.monotonic()
        if not done:
            call.hung = True
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
            return call
        try:
            call.result = task.result()
        except BaseException as exc:  # recorded and judged by the checker
            call.error = exc
        return call


def error_violations(calls: list[Call]) -> list[str]:
    """Every call ends within its bound, and every error is in the ``JetStreamError`` tree
    (a cancelled call may also end with ``CancelledError``)."""
    found = []
    for call in calls:
        if call.hung:
            found.append(f"call outlived its {CALL_BOUND:.0f} s bound: {call.describe()}")
        error = call.error
        if error is None or isinstance(error, jetstream.JetStreamError):
            continue
        if call.cancelled and isinstance(error, asyncio.CancelledError):
            continue
        found.append(f"error outside the JetStreamError tree: {call.describe()}")
    return found


class World:
    """A server (shared, restartable on its store) and a proxy in front of it; the library
    connects through the proxy so that connections can be cut."""

    def __init__(self, server: jetstream.EmbeddedServer) -> None:
        self.server = server
        self.proxy = TcpProxy(server.port)
        self.faults: list[str] = []

    async def __aenter__(self) -> World:
        if not self.server.running:
            await asyncio.to_thread(self.server.start)
        await self.proxy.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.heal()
        await self.proxy.close()

    async def connect(self) -> jetstream.JetStream:
        return await jetstream.connect(
            self.proxy.url,
            timeout=REQUEST_TIMEOUT,
            retry_deadline=RETRY_DEADLINE,
            reconnect_time_wait=0.05,
            max_reconnect_attempts=-1,
            connect_attempts=5,
        )

    async def inject(self, kind: str, seconds: float) -> None:
        """One fault: ``pause`` (SIGSTOP for ``seconds``), ``kill`` (kill -9, down for
        ``seconds``, restarted on the same store) or ``cut`` (every connection closed)."""
        self.faults.append(f"{kind} {seconds:.2f}s")
        if kind == "pause":
            await asyncio.to_thread(self.server.pause)
            try:
                await asyncio.sleep(seconds)
            finally:
                await asyncio.to_thread(self.server.resume)
        elif kind == "kill":
            await asyncio.to_thread(self.server.kill)
            try:
                await asyncio.sleep(seconds)
            finally:
                await asyncio.to_thread(self.server.start)
        elif kind == "cut":
            self.proxy.cut()
        else:
            raise ValueError(f"unknown fault {kind!r}")

    async def play(
        self,
        js: jetstream.JetStream,
        history: History,
        step: Callable[[int, Step], Awaitable[None]],
    ) -> None:
        """Run the history's tasks concurrently (``step(task number, step)`` each) while its
        faults are injected; return once all are over, the server is healed and ``js`` is
        connected again."""

        async def task(number: int, steps: list[Step]) -> None:
            for each in steps:
                await step(number, each)

        async def faults() -> None:
            for fault in history.faults:
                await asyncio.sleep(fault.delay_ms / 1000)
                await self.inject(fault.kind, fault.seconds)

        await asyncio.gather(*(task(i, steps) for i, steps in enumerate(history.tasks)), faults())
        await self.heal()
        await wait_connected(js)

    async def heal(self) -> None:
        """Leave the server running and answering (after a fault or a failed example)."""
        await asyncio.to_thread(self.server.resume)
        if not self.server.running:
            await asyncio.to_thread(self.server.start)


async def wait_connected(js: jetstream.JetStream, timeout: float = 20.0) -> None:
    """Wait until the client is connected and the server answers JetStream requests."""
    async with asyncio.timeout(timeout):
        while True:
            if js.nc.is_connected:
                with contextlib.suppress(Exception):
                    await js.nc.request("$JS.API.INFO", b"", timeout=1.0)
                    return
            await asyncio.sleep(0.05)


@dataclass(frozen=True)
class RawMessage:
    seq: int
    subject: str
    headers: dict[str, str]
    data: bytes


async def stream_messages(js: jetstream.JetStream, stream: str, subjects: str) -> list[RawMessage]:
    """Every message ``stream`` holds on ``subjects``, read with plain ``STREAM.MSG.GET``
    requests (``next_by_subj``), independently of the library's consumers."""
    found: list[RawMessage] = []
    seq = 1
    while True:
        request = {"seq": seq, "next_by_subj": subjects}
        body = await api_request(js, f"STREAM.MSG.GET.{stream}", request, absent_ok=True)
        if body is None:
            return found
        message = body["message"]
        found.append(
            RawMessage(
                seq=message["seq"],
                subject=message["subject"],
                headers=_parse_headers(base64.b64decode(message.get("hdrs") or b"")),
                data=base64.b64decode(message.get("data") or b""),
            )
        )
        seq = message["seq"] + 1


async def api_request(
    js: jetstream.JetStream, api: str, request: dict[str, Any], *, absent_ok: bool = False
) -> dict[str, Any] | None:
    """One raw JetStream API request (``$JS.API.<api>``), asked again for up to 20 s while
    the server is not ready (just restarted); None for a 404 when ``absent_ok``."""
    deadline = time.monotonic() + 20.0
    while True:
        try:
            reply = await js.nc.request(f"$JS.API.{api}", json.dumps(request).encode(), timeout=5)
            body: dict[str, Any] = json.loads(reply.data)
        except Exception as exc:  # not ready yet: no responders, timeout, empty reply
            error: Any = exc
        else:
            error = body.get("error")
            if error is None:
                return body
            if absent_ok and error.get("code") == 404:
                return None
        if time.monotonic() > deadline:
            raise AssertionError(f"$JS.API.{api} {request}: {error}")
        await asyncio.sleep(0.2)


def _parse_headers(raw: bytes) -> dict[str, str]:
    headers: dict[str, str] = {}
    for line in raw.decode().split("\r\n")[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip()] = value.strip()
    return headers
