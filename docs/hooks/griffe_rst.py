"""A griffe extension for the API reference: the package's docstrings are written for
``help()`` and Sphinx-style roles; this rewrites the few reStructuredText constructs they use
into Markdown before mkdocstrings renders them.

* ``:class:`~torchstream.explain.IncrementalPFI``` (and ``:meth:``, ``:func:``, ``:attr:``,
  ``:data:``, ``:mod:``, ``:exc:``, ``:obj:``) -> a code span of the name (the last part with
  ``~``);
* ``[PFI]_`` (a citation) -> ``[PFI]``, and ``.. [PFI] Author (year) ...`` -> ``[PFI] Author
  (year) ...``;
* a paragraph ending in ``::`` (a literal block follows) -> ending in ``:``;
* a paragraph of prose after the entries of a "Parameters" or "Attributes" section (numpy
  style would read its first word as a parameter) -> under a "Notes" heading;
* a doctest (``>>>``) outside an "Examples" section (after the parameters, or under a singular
  "Example" heading) -> under an "Examples" heading, where it renders as code.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:class|meth|func|attr|data|mod|exc|obj|const|term):`(~?)([^`]+)`")
CITATION = re.compile(r"\[([A-Za-z][\w-]*)\]_")
CITATION_TARGET = re.compile(r"^(\s*)\.\. \[([A-Za-z][\w-]*)\]", re.M)
LITERAL = re.compile(r"(\S)::$", re.M)
BARE_LITERAL = re.compile(r"^(\s*)::$", re.M)


def _role(match: re.Match[str]) -> str:
    short, target = match.groups()
    target = target.strip()
    name = target.rsplit(".", 1)[-1] if short else target
    return f"`{name}`"


ENTRY = re.compile(r"^\*{0,2}[A-Za-z_]\w*(\s*,\s*\*{0,2}[A-Za-z_]\w*)*(\s*:.*)?$")
LISTS = ("parameters", "other parameters", "attributes")


def _heading(out: list[str], indent: str, title: str) -> None:
    if out and out[-1].strip():
        out.append("")
    out += [indent + title, indent + "-" * len(title), ""]


def _sections(text: str) -> str:
    """Every doctest under an "Examples" heading and every paragraph of prose that follows a
    list of parameters or attributes under a "Notes" heading (numpy style)."""
    lines = text.split("\n")
    out: list[str] = []
    section = ""
    for i, line in enumerate(lines):
        underline = lines[i + 1] if i + 1 < len(lines) else ""
        if line.strip() and set(underline.strip()) == {"-"} and \
                len(underline.strip()) == len(line.strip()):
            section = line.strip().lower()
            if section == "example":
                line, section = line.replace("Example", "Examples"), "examples"
                lines[i + 1] = underline.replace("-" * len(underline.strip()),
                                                 "-" * len("Examples"))
        elif line.lstrip().startswith(">>>") and section != "examples":
            _heading(out, line[: len(line) - len(line.lstrip())], "Examples")
            section = "examples"
        elif (section in LISTS and line.strip() and line == line.lstrip()
              and (not out or not out[-1].strip()) and not ENTRY.match(line)):
            _heading(out, "", "Notes")
            section = "notes"
        out.append(line)
    return "\n".join(out)


def markdown(text: str) -> str:
    """``text`` with the reStructuredText constructs above rewritten as Markdown."""
    text = _sections(text)
    text = ROLE.sub(_role, text)
    text = CITATION_TARGET.sub(lambda m: f"{m.group(1)}[{m.group(2)}]", text)
    text = CITATION.sub(r"[\1]", text)
    text = LITERAL.sub(r"\1:", text)
    return BARE_LITERAL.sub(r"\1", text)


class RestructuredToMarkdown(griffe.Extension):
    """Rewrites every docstring as it is loaded (see the module docstring)."""

    def on_instance(self, *, node: Any, obj: griffe.Object, agent: Any, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown(obj.docstring.value)
