"""Object names and local paths as ``obj put`` / ``obj get`` take them: a name with rich markup
brackets works on a terminal (progress bar) as piped, an output path ending in ``/`` is a
directory, and an empty ``--name`` is refused."""

from __future__ import annotations

from pathlib import Path

import pexpect
import pytest

import jetstream
from tests.cli.cli_helpers import (
    ROOT,
    cli_command,
    cli_env,
    jetstore,
)
from tests.conftest import StoreFactory

pytestmark = pytest.mark.integration


def _on_terminal(*args: str) -> tuple[int | None, str]:
    command = cli_command(*args)
    child = pexpect.spawn(
        command[0], command[1:], env=cli_env(TERM="xterm"), cwd=str(ROOT), dimensions=(24, 120)
    )
    try:
        child.expect(pexpect.EOF, timeout=60)
    finally:
        child.close()
    return child.exitstatus, child.before.decode(errors="replace")


async def test_obj_put_on_a_terminal_with_brackets_in_the_name(
    make_store: StoreFactory, nats_server: jetstream.EmbeddedServer, tmp_path: Path
) -> None:
    """Object names are arbitrary text; on a terminal the bar's label is parsed as rich
    markup, so a name like `weird[/x].txt` fails the upload with rich's MarkupError (exit 1).
    Piped, the same command works."""
    store = await make_store()
    source = tmp_path / "hello.txt"
    source.write_bytes(b"hello\n")
    code, screen = _on_terminal(
        "obj", "put", store.name, str(source), "--name", "weird[/x].txt", "-s", nats_server.url
    )
    assert "MarkupError" not in screen, screen
    assert code == 0, screen
    assert (await store.get_bytes("weird[/x].txt")) == b"hello\n"


async def test_obj_get_on_a_terminal_with_brackets_in_the_name(
    make_store: StoreFactory, nats_server: jetstream.EmbeddedServer, tmp_path: Path
) -> None:
    store = await make_store()
    await store.put("weird[/x].txt", b"hello\n")
    out = tmp_path / "got.txt"
    code, screen = _on_terminal(
        "obj", "get", store.name, "weird[/x].txt", "-o", str(out), "-s", nats_server.url
    )
    assert "MarkupError" not in screen, screen
    assert code == 0, screen
    assert out.read_bytes() == b"hello\n"


async def test_obj_get_output_with_trailing_slash_is_a_directory(
    make_store: StoreFactory, nats_server: jetstream.EmbeddedServer, tmp_path: Path
) -> None:
    """`obj get S report.txt -o restore/` (restore/ not yet there): the trailing slash says
    a directory, like `cp x dir/`; the object is written as a *file* named `restore`
    instead. Expected: restore/report.txt (or a refusal), never a file called `restore`."""
    store = await make_store()
    await store.put("report.txt", b"data\n")
    run = jetstore(
        "obj",
        "get",
        store.name,
        "report.txt",
        "-o",
        f"{tmp_path / 'restore'}/",
        "-s",
        nats_server.url,
    )
    assert not (tmp_path / "restore").is_file(), run.text
    assert run.code == 0, run.text
    assert (tmp_path / "restore" / "report.txt").read_bytes() == b"data\n"


async def test_obj_put_with_an_empty_name_is_refused(
    make_store: StoreFactory, nats_server: jetstream.EmbeddedServer, tmp_path: Path
) -> None:
    """`--name ''` stored the object under the file's own name, as if no name was given."""
    store = await make_store()
    source = tmp_path / "hello.txt"
    source.write_bytes(b"hello\n")
    run = jetstore("obj", "put", store.name, str(source), "--name", "", "-s", nats_server.url)
    assert run.code == 2, run.text
    assert [info.name async for info in store.list()] == []
