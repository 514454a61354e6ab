"""Uploads and downloads of ``jetstore obj put/get``: which files become which objects (and
back), ``--parallel`` transfers at a time, each with its progress and its result line. One
object's failure does not stop the others; the verb then exits with that failure's code."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import stat
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO

import click

import jetstream
import objstore

from ._connect import Settings
from ._endings import stdin_binary
from ._fields import object_fields
from ._output import EXIT_FAILED, EXIT_OK, emit_json_line, error_line, exit_code_for
from ._progress import Reporter

__all__ = ["Plan", "Upload", "download", "plan_uploads", "report_skipped", "upload"]


@dataclasses.dataclass(frozen=True)
class Upload:
    name: str
    source: str | BinaryIO | objstore.ScannedFile
    size: int | None


@dataclasses.dataclass(frozen=True)
class Plan:
    """What ``obj put`` uploads, the entries of its directories it leaves out, and its
    directories without a file to upload."""

    uploads: list[Upload]
    skipped: list[objstore.SkippedEntry]
    empty: list[str]


def plan_uploads(
    paths: tuple[str, ...], name: str | None, prefix: str, *, follow_links: bool = False
) -> Plan:
    """The objects the arguments make: a file under its base name (or ``--name``), every file
    under a directory under its path relative to it (as :func:`objstore.scan_directory`
    takes them: links out of the directory only with ``follow_links``), stdin (``-``) under
    ``--name``.

    Raises:
        click.UsageError: ``--name`` with several sources, stdin without it, a name twice.
    """
    if name == "":
        raise click.UsageError("--name must not be empty")
    if name is not None and (len(paths) > 1 or Path(paths[0]).is_dir()):
        raise click.UsageError("--name takes one file (or stdin)")
    plan = Plan([], [], [])
    for path in paths:
        if path == "-":
            if name is None:
                raise click.UsageError("uploading stdin (-) needs --name")
            plan.uploads.append(Upload(prefix + name, stdin_binary(), None))
        elif Path(path).is_dir():
            scan = objstore.scan_directory(path, follow_links=follow_links)
            plan.skipped.extend(scan.skipped)
            if not scan.files:
                plan.empty.append(path)
            plan.uploads.extend(Upload(prefix + f.name, f, f.size) for f in scan.files)
        else:
            file = Path(path)
            plan.uploads.append(Upload(prefix + (name or file.name), path, file.stat().st_size))
    seen: set[str] = set()
    for item in plan.uploads:
        if item.name in seen:
            raise click.UsageError(f"two sources would be stored as {item.name!r}")
        seen.add(item.name)
    return plan


async def _each(items: list[Any], parallel: int, one: Callable[[Any], Awaitable[int]]) -> int:
    """Run ``one`` over the items, ``parallel`` at a time; the first failure's exit code."""
    limit = asyncio.Semaphore(parallel)

    async def limited(item: Any) -> int:
        async with limit:
            return await one(item)

    codes = await asyncio.gather(*(limited(item) for item in items))
    return next((code for code in codes if code), 0)


def _total(sizes: list[int | None]) -> int | None:
    return None if any(size is None for size in sizes) else sum(s or 0 for s in sizes)


async def upload(
    settings: Settings,
    js: jetstream.JetStream,
    store_name: str,
    plan: Plan,
    options: dict[str, Any],
    parallel: int,
) -> int:
    """``obj put``: every planned upload (:func:`plan_uploads`); returns the exit code: the
    first failure's, else 1 if the plan skipped anything (:func:`report_skipped`)."""
    uploads = plan.uploads
    store = await objstore.open_store(js, store_name)
    progress = reporter(
        quiet=settings.quiet,
        json=settings.json,
        files=len(uploads),
        total_bytes=_total([u.size for u in uploads]),
    )

    async def one(item: Upload) -> int:
        callback = progress.transfer(item.name, item.size)
        try:
            with _opened(item.source) as source:
                info = await store.put(item.name, _readable(source), progress=callback, **options)
        except (jetstream.JetStreamError, OSError) as exc:
            return _failed(progress, item.name, exc)
        _done(settings, progress, info, f"stored {info.name}: {_summary(info)}")
        return 0

    with progress:
        code = await _each(uploads, parallel, one)
    return code or (EXIT_FAILED if plan.skipped else EXIT_OK)


def report_skipped(plan: Plan) -> None:
    """A line on stderr for each entry of a directory the upload leaves out (they make the
    verb exit 1, once the rest is uploaded).

    Raises:
        click.UsageError: a directory has no file to upload (after its skipped entries).
    """
    for entry in plan.skipped:
        click.echo(f"jetstore: error: skipped {entry.path!r}: {entry.reason}", err=True)
    if plan.empty:
        raise click.UsageError(f"no files to upload under {plan.empty[0]!r}")


@contextlib.contextmanager
def _opened(source: str | BinaryIO | objstore.ScannedFile) -> Iterator[str | BinaryIO]:
    """A directory's file opened as its scan checks it (still a regular file, still inside
    the directory); other sources as they are."""
    if not isinstance(source, objstore.ScannedFile):
        yield source
        return
    with source.open() as file:
        yield file


def _readable(source: str | BinaryIO) -> str | BinaryIO | AsyncIterator[bytes]:
    """What ``store.put`` reads: a pipe (stdin from another command) through the event loop,
    anything else as it is. A pipe read in a thread cannot be cancelled: after Ctrl-C or
    SIGTERM the upload was removed, but the process waited for the writer's next bytes."""
    if isinstance(source, str):
        return source
    try:
        mode = os.fstat(source.fileno()).st_mode
    except (OSError, ValueError):
        return source
    return _pipe_chunks(source) if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) else source


async def _pipe_chunks(pipe: BinaryIO) -> AsyncIterator[bytes]:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=objstore.DEFAULT_CHUNK_SIZE)
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
    try:
        while chunk := await reader.read(objstore.DEFAULT_CHUNK_SIZE):
            yield chunk
    finally:
        transport.close()


def _summary(info: objstore.ObjectInfo) -> str:
    return f"{info.size} bytes, {info.chunks} chunks, {info.digest}"


def _done(settings: Settings, progress: Reporter, info: objstore.ObjectInfo, line: str) -> None:
    if settings.json:
        emit_json_line(object_fields(info))
    progress.done(info.name, line)


def _failed(progress: Reporter, name: str, error: BaseException) -> int:
    progress.failed(name, f"{error_line(error)} ({name})")
    return exit_code_for(error)


async def download(
    settings: Settings,
    js: jetstream.JetStream,
    store_name: str,
    names: list[str],
    output: str | None,
    all_objects: bool,
    parallel: int,
) -> int:
    """``obj get``: the named objects (or all) to a file, a directory or stdout."""
    store = await objstore.open_store(js, store_name)
    if all_objects:
        infos = [i async for i in store.list() if not i.is_link]
    else:
        infos = [await store.info(n) for n in names]  # all exist, or exit 1 before any write
    if output == "-":
        return await _to_stdout(settings, store, infos[0])
    targets = _targets(infos, output, several=all_objects or len(names) > 1)
    progress = reporter(
        quiet=settings.quiet,
        json=settings.json,
        files=len(infos),
        total_bytes=_total([None if i.is_link else i.size for i in infos]),
    )

    async def one(pair: tuple[objstore.ObjectInfo, Path | objstore.PathNotAllowedError]) -> int:
        info, target = pair
        if isinstance(target, objstore.PathNotAllowedError):  # this object only: exit 1
            progress.failed(info.name, f"{error_line(target)}; fetch it with -o FILE")
            return EXIT_FAILED
        callback = progress.transfer(info.name, None if info.is_link else info.size)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            got = await store.get_file(info.name, target, progress=callback)
        except (jetstream.JetStreamError, OSError) as exc:
            return _failed(progress, info.name, exc)
        line = f"saved {info.name} -> {target} ({got.size} bytes, digest verified)"
        _done(settings, progress, got, line)
        return 0

    with progress:
        return await _each(list(zip(infos, targets, strict=True)), parallel, one)


def _targets(
    infos: list[objstore.ObjectInfo], output: str | None, *, several: bool
) -> list[Path | objstore.PathNotAllowedError]:
    """Each object's file: ``output`` itself for one object (unless it is a directory, or
    ends with ``/`` as ``cp x dir/`` does), else its base name here, or its name under the
    directory (``output`` or the current one); a name :func:`objstore.local_path` refuses
    is that object's error."""
    into = output is not None and (output.endswith(("/", os.sep)) or Path(output).is_dir())
    if not several and not into:
        if output is not None:
            return [Path(output)]
        name = infos[0].name
        return [_local(Path("."), PurePosixPath(name).name or name)]
    directory = Path(output or ".")
    if directory.exists() and not directory.is_dir():
        raise click.UsageError(f"{output!r} is not a directory (needed for several objects)")
    return [_local(directory, info.name) for info in infos]


def _local(directory: Path, name: str) -> Path | objstore.PathNotAllowedError:
    try:
        return objstore.local_path(directory, name)
    except objstore.PathNotAllowedError as exc:
        return exc


async def _to_stdout(
    settings: Settings, store: objstore.ObjectStore, info: objstore.ObjectInfo
) -> int:
    """Stream the object to stdout (a bar on stderr if that is a terminal, but no result line:
    stdout holds the data); its digest is checked at the end (exit 1 if wrong)."""
    out = sys.stdout.buffer
    size = None if info.is_link else info.size
    with reporter(quiet=settings.quiet, json=settings.json, files=1, total_bytes=size) as progress:
        callback = progress.transfer(info.name, size)
        done = 0
        async with store.open(info.name) as reader:
            async for chunk in reader:
                out.write(chunk)
                done += len(chunk)
                callback(done, size)
    out.flush()
    return 0


def reporter(*, quiet: bool, json: bool, files: int, total_bytes: int | None) -> Reporter:
    """Bars when stderr is a terminal (and neither ``--quiet`` nor ``--json``), else plain."""
    if quiet or json or not sys.stderr.isatty():
        return Reporter(quiet=quiet or json)
    from ._bars import BarReporter  # rich only when there are bars to draw

    return BarReporter(files, total_bytes)
