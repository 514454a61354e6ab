"""The README's code and the code of docs/*.md, as blocks a test can run: every ```python
block, with the heading it sits under. Fragments (not whole programs) are run in order in one
namespace per document, like a notebook, in the world ``snippet_world`` makes."""

from __future__ import annotations

import ast
import asyncio
import base64
import contextlib
import functools
import inspect
import json
import os
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import jetstream
import kvstore
import objstore
import pcgroups

ROOT = Path(__file__).parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
_BLOCK = re.compile(r"^```python\n(.*?)^```$", re.S | re.M)
_ANY_BLOCK = re.compile(r"^```.*?^```$", re.S | re.M)


@dataclass(frozen=True)
class Block:
    heading: str
    line: int
    code: str
    document: str = "README.md"

    @property
    def is_program(self) -> bool:
        """A whole program (it runs its own event loop), not a fragment."""
        return "asyncio.run(" in self.code

    @property
    def needs_spark(self) -> bool:
        return "spark" in self.heading.lower()


def python_blocks(document: Path = README) -> list[Block]:
    text = document.read_text()
    blocks = []
    for match in _BLOCK.finditer(text):
        before = text[: match.start()]
        prose = _ANY_BLOCK.sub("", before)  # a "# comment" in a code block is no heading
        headings = re.findall(r"^#+ (.*)$", prose, re.M)
        line = before.count("\n") + 2
        blocks.append(Block(headings[-1], line, match.group(1), document.name))
    return blocks


async def run_fragment(block: Block, namespace: dict[str, Any]) -> None:
    """Run a fragment with top-level ``await``s in ``namespace`` (which it may extend)."""
    code = compile(
        block.code, f"{block.document}:{block.line}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    )
    result = eval(code, namespace)  # the document's own code, nothing else
    if inspect.isawaitable(result):
        await result


async def run_fragments(blocks: list[Block], namespace: dict[str, Any]) -> None:
    """Run ``blocks`` in order; a failure names the document, line and heading."""
    for block in blocks:
        try:
            await asyncio.wait_for(run_fragment(block, namespace), timeout=60)
        except BaseException as exc:
            where = f"{block.document}:{block.line} ({block.heading})"
            raise AssertionError(f"{where} failed") from exc


@contextlib.asynccontextmanager
async def snippet_world(js: jetstream.JetStream, directory: Path) -> AsyncIterator[dict[str, Any]]:
    """What the fragments assume, in ``directory`` (the caller makes it the working
    directory): a connection ``js`` and its server's ``url``, a bucket ``bucket`` ("profiles",
    history 5), an ORDERS stream with four orders, a file path/to/model.bin to upload, a key
    file ``path`` and its keyring ``ring``. Every bucket, store and stream a fragment names is
    removed afterwards."""
    (directory / "path" / "to").mkdir(parents=True)
    (directory / "path" / "to" / "model.bin").write_bytes(os.urandom(300_000))
    key_file = directory / "jetstore-keys.json"  # the format of docs/CODECS.md, "Key file format"
    key = base64.b64encode(jetstream.Keyring.new_key()).decode()
    key_file.write_text(json.dumps({"primary": "2026-11", "keys": {"2026-11": key}}))
    try:
        await js.add_stream(jetstream.StreamConfig(name="ORDERS", subjects=["orders.>"]))
        for subject in ("orders.new", "orders.paid", "orders.packed", "orders.shipped"):
            await js.publish(subject, b"{}")
        bucket = await kvstore.create_bucket(js, "profiles", history=5)
        yield {
            "asyncio": asyncio,
            "timedelta": timedelta,
            "jetstream": jetstream,
            "kvstore": kvstore,
            "objstore": objstore,
            "js": js,
            "url": js.nc.connected_url.geturl(),  # for the blocking client's connect(url)
            "bucket": bucket,
            "path": str(key_file),
            "ring": jetstream.Keyring.from_file(key_file),
        }
    finally:
        await _remove(js)


async def _remove(js: jetstream.JetStream) -> None:
    """Groups first (their work queues source ORDERS), then everything else; what a fragment
    did not make is not found, and that is fine."""
    buckets = ("profiles", "people", "customers", "files", "secrets", "current", "legacy")
    stores = ("artifacts", "models", "reports")
    removals: list[Callable[[], Awaitable[object]]] = [
        *(
            functools.partial(pcgroups.delete_elastic, js, "ORDERS", g)
            for g in ("billing", "shipping")
        ),
        functools.partial(js.delete_stream, "ORDERS"),
        *(functools.partial(kvstore.delete_bucket, js, name) for name in buckets),
        *(functools.partial(objstore.delete_store, js, name) for name in stores),
    ]
    for remove in removals:
        with contextlib.suppress(jetstream.JetStreamError):
            await remove()
