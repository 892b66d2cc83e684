"""Every ```python block of the documentation's pages runs (``docs/index.md`` and
``docs/guide/*.md``): the guide cannot drift from the code.

A page's blocks run in order as one script, in a fresh Python process, from an empty temporary
folder (what a block writes, ``runs/`` for instance, lands there). The script holds each block at
its line in the page (the lines between blocks are blank), so a traceback's line number is the
page's. Two HTML comments, on the last non-blank line before a block's fence, change how a block
is run, and say why in the Markdown itself:

* ``<!-- skip: REASON -->``: the block is not run (it needs what the test machine lacks: a GPU,
  a Ray cluster, a data set). The reason is required.
* ``<!-- test: OLD -> NEW; OLD2 -> NEW2 -->``: the block runs with each ``OLD`` replaced by
  ``NEW`` (a size that would take the test suite too long, such as ``n_samples=10_000 ->
  n_samples=500``); each ``OLD`` must occur in the block exactly once.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted([DOCS / "index.md", *(DOCS / "guide").glob("*.md")])
#: A page's blocks must finish within this many seconds.
TIMEOUT_S = 180

_FENCE = re.compile(r"^( *)```python\n(.*?)^\1```", re.S | re.M)
_DIRECTIVE = re.compile(r"^ *<!--\s*(skip|test)\b(.*?)-->\s*$")


@dataclass
class Block:
    """A ```python block of a page: its first code line (1-based), code, and directives."""

    line: int
    code: str
    skip: str | None = None
    replace: list[tuple[str, str]] = field(default_factory=list)

    def runnable_code(self) -> str:
        code = self.code
        for old, new in self.replace:
            count = code.count(old)
            if count != 1:
                raise ValueError(f"line {self.line}: '<!-- test: {old} -> {new} -->' needs "
                                 f"{old!r} exactly once in the block, found it {count} times")
            code = code.replace(old, new)
        return code


def blocks(text: str) -> list[Block]:
    """The page's ```python blocks with the directive before each; an error, naming the line,
    for a skip without a reason, a malformed replacement or a directive before no block."""
    out = []
    lines = text.splitlines()
    used: set[int] = set()
    for match in _FENCE.finditer(text):
        fence = text.count("\n", 0, match.start())  # 0-based line of the opening fence
        block = Block(line=fence + 2, code=textwrap.dedent(match.group(2)))
        before = fence - 1
        while before >= 0 and not lines[before].strip():
            before -= 1
        directive = _DIRECTIVE.match(lines[before]) if before >= 0 else None
        if directive:
            used.add(before)
            kind, body = directive.group(1), directive.group(2).strip()
            if not body.startswith(":") or not body[1:].strip():
                raise ValueError(f"line {before + 1}: '<!-- {kind}: ... -->' needs a "
                                 f"{'reason' if kind == 'skip' else 'replacement'} after "
                                 "the colon")
            body = body[1:].strip()
            if kind == "skip":
                block.skip = body
            else:
                for part in body.split(";"):
                    old, arrow, new = part.partition("->")
                    if not arrow or not old.strip():
                        raise ValueError(f"line {before + 1}: {part.strip()!r} is not "
                                         "'OLD -> NEW'")
                    block.replace.append((old.strip(), new.strip()))
        out.append(block)
    for i, line in enumerate(lines):
        if _DIRECTIVE.match(line) and i not in used:
            raise ValueError(f"line {i + 1}: {line.strip()!r} is not right before a ```python "
                             "block")
    return out


def script(text: str, page_blocks: list[Block]) -> str:
    """The page's runnable blocks, each at its line of the page, blank lines elsewhere."""
    n_lines = text.count("\n") + 1
    lines = [""] * n_lines
    for block in page_blocks:
        if block.skip is None:
            code = block.runnable_code().splitlines()
            lines[block.line - 1:block.line - 1 + len(code)] = code
    return "\n".join(lines) + "\n"


def _pages_with_blocks() -> list[Path]:
    return [p for p in PAGES if _FENCE.search(p.read_text(encoding="utf-8"))]


def test_the_pages_hold_examples_to_run():
    pages = _pages_with_blocks()
    assert len(pages) >= 5, [p.name for p in pages]
    runnable = [b for p in pages for b in blocks(p.read_text(encoding="utf-8")) if not b.skip]
    assert len(runnable) >= 8


@pytest.mark.parametrize("page", _pages_with_blocks(), ids=lambda p: p.relative_to(DOCS).as_posix())
def test_the_pages_python_blocks_run(page: Path, tmp_path: Path):
    text = page.read_text(encoding="utf-8")
    page_blocks = blocks(text)
    if all(b.skip for b in page_blocks):
        pytest.skip("; ".join(f"line {b.line}: {b.skip}" for b in page_blocks))
    name = page.relative_to(DOCS).as_posix()
    path = tmp_path / (re.sub(r"\W", "_", name) + ".py")
    path.write_text(script(text, page_blocks), encoding="utf-8")
    env = {**os.environ, "MPLBACKEND": "Agg", "PYTHONWARNINGS": "ignore"}
    done = subprocess.run([sys.executable, path.name], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=TIMEOUT_S)
    if done.returncode != 0:
        pytest.fail(f"docs/{name}'s python blocks failed (the script's line numbers are the "
                    f"page's):\n{done.stderr[-4000:]}", pytrace=False)


# the parser itself

PAGE = """# A page

<!-- skip: needs CUDA -->
```python
import torch
torch.ones(1, device="cuda")
```

Some text.

<!-- test: n=10_000 -> n=10; print(n) -> print(n + 1) -->

```python
n=10_000
print(n)
```

- a list item:

    ```python
    x = 1
    ```
"""


def test_blocks_reads_the_directives_and_the_lines():
    found = blocks(PAGE)
    assert [b.line for b in found] == [5, 14, 21]
    assert found[0].skip == "needs CUDA" and not found[0].replace
    assert found[1].skip is None
    assert found[1].replace == [("n=10_000", "n=10"), ("print(n)", "print(n + 1)")]
    assert found[1].runnable_code() == "n=10\nprint(n + 1)\n"
    assert found[2].code == "x = 1\n" and found[2].skip is None and not found[2].replace
    lines = script(PAGE, found).splitlines()
    assert len(lines) == PAGE.count("\n") + 1
    assert lines[13:15] == ["n=10", "print(n + 1)"] and lines[20] == "x = 1"
    assert not any("cuda" in line for line in lines)  # the skipped block is not in the script
    assert sum(bool(line) for line in lines) == 3


@pytest.mark.parametrize("directive, message", [
    ("<!-- skip -->", "needs a reason"),
    ("<!-- skip:   -->", "needs a reason"),
    ("<!-- test: n=1 -->", "is not 'OLD -> NEW'"),
    ("<!-- test: -> 2 -->", "is not 'OLD -> NEW'"),
])
def test_a_directive_without_its_reason_or_replacement_is_an_error(directive, message):
    with pytest.raises(ValueError, match=message):
        blocks(f"text\n{directive}\n```python\nn=1\n```\n")


def test_a_replacement_must_match_once_and_a_directive_needs_a_block():
    (block,) = blocks("<!-- test: n=1 -> n=2 -->\n```python\nn=1\nn=1\n```\n")
    with pytest.raises(ValueError, match="exactly once in the block, found it 2 times"):
        block.runnable_code()
    with pytest.raises(ValueError, match="line 1: .* is not right before a ```python block"):
        blocks("<!-- skip: no GPU -->\n\nsome text\n\n```python\nn=1\n```\n")
    with pytest.raises(ValueError, match="line 4: "):
        blocks("```python\nn=1\n```\n<!-- skip: no GPU -->\n")
