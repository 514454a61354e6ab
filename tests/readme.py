"""The ```python blocks of the README and of docs/*.md, as a reader sees them, and how a test
runs each as written.

A block is one of:

- a **program**, run alone as it stands (an async one calls ``asyncio.run``); one that holds
  the line ``...  # ... snippets ... run here ...`` is a *whole* other blocks are fragments
  of;
- a **fragment**, whose first line names its whole: ``# inside main() of "A bucket" above``
  (a whole of the same document, by its heading) or ``# inside main() of "Running the
  snippets" in docs/README.md``. A document's fragments of one whole are put, in order, in
  place of its ``...`` line, and that program runs;
- a block whose first line says which test runs it, and with what: ``# run by
  tests/docs/test_key_name_migration.py, with ...``.
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
import traceback
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
_BLOCK = re.compile(r"^```python\n(.*?)^```$", re.S | re.M)
_ANY_BLOCK = re.compile(r"^```.*?^```$", re.S | re.M)
_FRAGMENT = re.compile(r'# inside main\(\) of "(?P<whole>[^"]+)"(?: in (?P<document>\S+\.md))?')
_RUN_BY = re.compile(r"# run by (?P<test>tests/\S+\.py)")
_PLACEHOLDER = re.compile(r"^(?P<indent> *)\.\.\.  # .*snippets.* run here", re.M)


@dataclass(frozen=True)
class Block:
    heading: str
    line: int
    code: str
    document: Path = README

    @property
    def where(self) -> str:
        return f"{self.document.relative_to(ROOT)}:{self.line} ({self.heading})"

    @property
    def is_program(self) -> bool:
        """A program that runs alone as written: any block not marked as a fragment or as
        run by a test."""
        return self.whole is None and self.run_by is None

    @property
    def is_whole(self) -> bool:
        """A program with a place where fragments go."""
        return self.is_program and _PLACEHOLDER.search(self.code) is not None

    @property
    def needs_spark(self) -> bool:
        return "spark" in self.heading.lower()

    @property
    def first_line(self) -> str:
        return self.code.split("\n", 1)[0]

    @property
    def whole(self) -> tuple[Path, str] | None:
        """The document and heading of the whole this fragment's first line names."""
        named = _FRAGMENT.match(self.first_line)
        if named is None:
            return None
        document = ROOT / named["document"] if named["document"] else self.document
        return document, named["whole"]

    @property
    def run_by(self) -> str | None:
        """The test file this block's first line says runs it."""
        named = _RUN_BY.match(self.first_line)
        return named["test"] if named else None


def python_blocks(document: Path = README) -> list[Block]:
    text = document.read_text()
    blocks = []
    for match in _BLOCK.finditer(text):
        before = text[: match.start()]
        prose = _ANY_BLOCK.sub("", before)  # a "# comment" in a code block is no heading
        headings = re.findall(r"^#+ (.*)$", prose, re.M)
        line = before.count("\n") + 2
        blocks.append(Block(headings[-1], line, match.group(1), document))
    return blocks


def whole_named(document: Path, heading: str) -> Block:
    wholes = [b for b in python_blocks(document) if b.heading == heading and b.is_whole]
    assert len(wholes) == 1, (
        f"{document.name} has no program under {heading!r} with a "
        "'...  # ... snippets ... run here' line for the fragments that name it"
    )
    return wholes[0]


def assemble(whole: Block, fragments: list[Block]) -> tuple[str, list[str]]:
    """The program ``whole`` with ``fragments`` in place of its ``...`` line, and, for each
    line of it, where that line is in the documents."""
    placeholder = _PLACEHOLDER.search(whole.code)
    assert placeholder is not None, f"{whole.where} has no place for snippets"
    before = whole.code[: placeholder.start()]
    after = whole.code[placeholder.end() :]
    lines: list[str] = []
    origin: list[str] = []

    def add(code: str, block: Block, first: int, indent: str = "") -> None:
        for offset, text in enumerate(code.splitlines()):
            lines.append(textwrap.indent(text, indent) if text.strip() else "")
            origin.append(f"{block.document.relative_to(ROOT)}:{first + offset}")

    add(before, whole, whole.line)
    for fragment in fragments:
        add(fragment.code, fragment, fragment.line, placeholder["indent"])
    add(after.split("\n", 1)[1], whole, whole.line + before.count("\n") + 1)
    return "\n".join(lines) + "\n", origin


def run_program(code: str, origin: list[str], name: str) -> None:
    """Run a program's source as ``python program.py`` would (a fresh ``__main__``
    namespace, its own event loop); a failure names the document line it came from."""
    filename = f"<{name}>"
    try:
        exec(compile(code, filename, "exec"), {"__name__": "__main__"})  # the documents' code
    except BaseException as exc:
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == filename]
        where = origin[frames[-1].lineno - 1] if frames and frames[-1].lineno else name
        raise AssertionError(f"{where} failed" + (f" ({name})" if where != name else "")) from exc


def run_whole(program: Block, fragments: list[Block]) -> None:
    """Run ``program``, with ``fragments`` in its place for them if it is a whole."""
    if not program.is_whole:
        assert not fragments, f"{program.where} has no place for snippets"
        lines = program.code.count("\n")
        origin = [f"{program.document.relative_to(ROOT)}:{program.line + n}" for n in range(lines)]
        run_program(program.code, origin, program.where)
        return
    code, origin = assemble(program, fragments)
    names = ", ".join(sorted({str(f.document.relative_to(ROOT)) for f in fragments}))
    run_program(code, origin, f"{program.where} with the snippets of {names or 'nothing'}")


async def run_fragment(block: Block, namespace: dict[str, object]) -> None:
    """Run a block with top-level ``await``s in ``namespace`` (which it may extend): for a
    test that makes the world a ``# run by`` block says it needs."""
    code = compile(block.code, block.where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    result = eval(code, namespace)  # the document's own code, nothing else
    if inspect.isawaitable(result):
        await result


def programs(documents: list[Path]) -> list[tuple[Block, list[Block]]]:
    """What runs the blocks of ``documents``: each whole with the fragments one document has
    of it (once per such document; alone when none has any), and each other program alone.
    Blocks run by a test of their own (``# run by``) and Spark blocks are not here."""
    blocks = [b for document in documents for b in python_blocks(document)]
    by_whole: dict[tuple[Path, str, Path], list[Block]] = {}
    for block in blocks:
        if block.whole is not None:
            by_whole.setdefault((*block.whole, block.document), []).append(block)
    runs = [
        (whole_named(document, heading), fragments)
        for (document, heading, _), fragments in by_whole.items()
    ]
    used = {whole for whole, _ in runs}
    runs += [(b, []) for b in blocks if b.is_program and b not in used and not b.needs_spark]
    return runs
