"""The README's code (or another document's), as blocks a test can run: every ```python block,
with the heading it sits under. Fragments (not whole programs) are run in order in one
namespace, like a notebook."""

from __future__ import annotations

import ast
import inspect
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

README = Path(__file__).parents[1] / "README.md"
_BLOCK = re.compile(r"^```python\n(.*?)^```$", re.S | re.M)


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
        headings = re.findall(r"^#+ (.*)$", before, re.M)
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
