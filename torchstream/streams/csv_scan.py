"""The bytes of a CSV file before they are parsed: readable, UTF-8 (or the named encoding) with
the BOM removed, RFC 4180 quoting, the same number of fields on every record, and the file line
where each record starts (for messages that name the line).

Records follow RFC 4180: fields are separated by the delimiter, a field that starts with ``"``
ends with ``"``, and a ``"`` inside it is written twice; such a field may hold delimiters and
line breaks. Lines holding only spaces, tabs or nothing are skipped (and still counted).
"""

from __future__ import annotations

import codecs
import csv
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["RecordMap", "Source", "check_records", "cut_records", "load", "parse_header"]

_QUOTE = 34
_BLANK_BYTES = (32, 9, 13)  # space, tab, carriage return


@dataclass(frozen=True)
class Source:
    """A CSV file's bytes as UTF-8 without a BOM, and how they were found."""

    path: Path
    data: bytes
    encoding: str
    bom: bool


def load(path: str | os.PathLike[str], *, encoding: str = "utf-8", delimiter: str = ",") -> Source:
    """Read ``path`` as bytes and check its encoding.

    A missing file raises ``FileNotFoundError``; a directory, an unreadable file, an unknown
    encoding or bytes that are not valid in ``encoding`` raise a ``ValueError`` that names the
    file (and the line and column of the first bad byte). A UTF-8 byte order mark is removed.
    Other encodings are converted to UTF-8.
    """
    p = Path(path)
    check_delimiter(delimiter)
    if not p.exists():
        raise FileNotFoundError(f"CSV file not found: {p}")
    if p.is_dir():
        raise ValueError(f"{p} is a directory, not a CSV file")
    try:
        codec = codecs.lookup(encoding).name
    except LookupError:
        raise ValueError(f"{p}: unknown encoding {encoding!r}") from None
    try:
        data = p.read_bytes()
    except OSError as e:
        raise ValueError(f"{p}: cannot read the file ({e.strerror or e})") from None
    bom = data.startswith(codecs.BOM_UTF8) and codec in ("utf-8", "utf-8-sig")
    if bom:
        data = data[len(codecs.BOM_UTF8):]
    try:
        text = data.decode("utf-8" if codec == "utf-8-sig" else codec)
    except UnicodeDecodeError as e:
        raise _encoding_error(p, data, e, codec, delimiter) from None
    if codec not in ("utf-8", "utf-8-sig"):
        data = text.encode("utf-8")
    return Source(p, data, codec, bom)


def check_delimiter(delimiter: str) -> None:
    if len(delimiter) != 1 or not delimiter.isascii() or delimiter in '"\r\n':
        raise ValueError(f"the delimiter must be one ASCII character other than a quote or a "
                         f"line break, got {delimiter!r}")


def _encoding_error(
    path: Path, data: bytes, e: UnicodeDecodeError, codec: str, delimiter: str
) -> ValueError:
    pos = e.start
    line = data.count(b"\n", 0, pos) + 1
    start = data.rfind(b"\n", 0, pos) + 1
    prefix = data[start:pos].decode("utf-8", errors="replace")
    field = _field_index(prefix, delimiter)
    try:
        header = parse_header(data, delimiter)
    except ValueError:
        header = []
    named = line > 1 and field < len(header)
    where = f"column {header[field]!r}" if named else f"field {field + 1}"
    bad = data[pos:e.end].hex(" ")
    return ValueError(
        f"{path}, line {line}, {where} (character {len(prefix) + 1}): byte(s) {bad} are not valid "
        f"{codec}; the file uses another encoding: pass it as encoding= (--encoding), "
        f"e.g. 'latin-1'"
    )


def _field_index(prefix: str, delimiter: str) -> int:
    """Index of the field that the text after ``prefix`` (the start of a record) falls in."""
    quoted, field = False, 0
    for ch in prefix:
        if ch == '"':
            quoted = not quoted
        elif ch == delimiter and not quoted:
            field += 1
    return field


def parse_header(data: bytes, delimiter: str) -> list[str]:
    """The names in the first record of ``data`` that is not blank (RFC 4180 quoting)."""
    newline = b"\n" if b"\n" in data or b"\r" not in data else b"\r"  # bare CR line ends
    start = 0
    while start < len(data):
        end = data.find(newline, start)
        odd = data.count(b'"', start, len(data) if end < 0 else end) % 2
        while end >= 0 and odd:  # a quoted line break: the record goes on
            after = data.find(newline, end + 1)
            odd ^= data.count(b'"', end, len(data) if after < 0 else after) % 2
            end = after
        end = len(data) if end < 0 else end
        record = data[start:end].decode("utf-8", errors="replace")
        if record.strip(" \t\r"):
            reader = csv.reader([record.rstrip("\r")], delimiter=delimiter, quotechar='"',
                                doublequote=True)
            try:
                return next(reader)
            except csv.Error as e:
                raise ValueError(f"the header cannot be read: {e}") from None
        start = end + 1
    return []


class RecordMap:
    """Where the records of a CSV text start and end, the file line of each, and its number of
    fields. Blank records are left out; record 0 is the header."""

    def __init__(self, data: bytes, delimiter: str) -> None:
        buf = np.frombuffer(data, dtype=np.uint8)
        newline = 10 if b"\n" in data or b"\r" not in data else 13  # bare CR line ends
        nl = np.flatnonzero(buf == newline)
        quotes = np.flatnonzero(buf == _QUOTE)
        delims = np.flatnonzero(buf == ord(delimiter))
        self.unclosed_quote = bool(quotes.size % 2)
        if quotes.size:  # a delimiter or a line break after an odd number of quotes is quoted
            ends = nl[(np.searchsorted(quotes, nl) & 1) == 0]
            delims = delims[(np.searchsorted(quotes, delims) & 1) == 0]
        else:
            ends = nl
        if not ends.size or ends[-1] != buf.size - 1:
            ends = np.append(ends, buf.size)
        starts = np.concatenate(([0], ends[:-1] + 1))
        last = np.clip(ends - 1, 0, max(buf.size - 1, 0))
        stops = ends - ((ends > starts) & (buf[last] == 13) if buf.size else 0)
        filled = ~np.isin(buf, (*_BLANK_BYTES, newline))
        count = np.concatenate(([0], np.cumsum(filled)))
        keep = count[stops] - count[starts] > 0
        self.starts = starts[keep]
        self.stops = stops[keep]
        self.fields = np.searchsorted(delims, self.stops) - np.searchsorted(delims, self.starts) + 1
        self.lines = np.searchsorted(nl, self.starts) + 1
        self.quoted = np.searchsorted(quotes, self.stops) > np.searchsorted(quotes, self.starts)

    def __len__(self) -> int:
        return len(self.starts)


def _stray_quote(data: bytes, delimiter: str) -> int | None:
    """Position of the first quote that opens a quoted section anywhere but at the start of a
    field (after an even number of quotes, not after a delimiter, a line break or a quote)."""
    buf = np.frombuffer(data, dtype=np.uint8)
    openers = np.flatnonzero(buf == _QUOTE)[0::2]
    before = buf[np.maximum(openers - 1, 0)]
    ok = (openers == 0) | np.isin(before, (ord(delimiter), 10, 13, _QUOTE))
    bad = openers[~ok]
    return int(bad[0]) if bad.size else None


def cut_records(data: bytes, delimiter: str, n: int) -> bytes:
    """The bytes of the header and the first ``n`` records."""
    records = RecordMap(data, delimiter)
    if len(records) <= n + 1:
        return data
    return data[: int(records.stops[n])]


def check_records(path: Path, data: bytes, delimiter: str, width: int, n_records: int) -> None:
    """Raise a ``ValueError`` naming the line when a quote is never closed or a record does not
    hold ``width`` fields; ``n_records`` (header included) is what the parser found.

    The common case costs one pass over the bytes: the number of unquoted delimiters must be
    ``(width - 1) * n_records``.
    """
    buf = np.frombuffer(data, dtype=np.uint8)
    quotes = np.flatnonzero(buf == _QUOTE)
    if quotes.size % 2 == 0:
        if quotes.size:
            delims = np.flatnonzero(buf == ord(delimiter))
            n_delims = int(((np.searchsorted(quotes, delims) & 1) == 0).sum())
        else:
            n_delims = int(np.count_nonzero(buf == ord(delimiter)))
        if n_delims == (width - 1) * n_records:
            return
    raise diagnose(path, data, delimiter, width) or ValueError(
        f"{path}: the parser found {n_records - 1:,} data rows, which does not match the "
        f"file's fields; check its quoting (RFC 4180)")


def diagnose(path: Path, data: bytes, delimiter: str, width: int | None) -> ValueError | None:
    """The first record-level fault of the file (a quote inside an unquoted field, an unclosed
    quote, a record with other than ``width`` fields), or ``None``."""
    records = RecordMap(data, delimiter)
    stray = _stray_quote(data, delimiter)
    if stray is not None:
        line = data.count(b"\n", 0, stray) + 1
        return ValueError(
            f"{path}, line {line}: a quote inside an unquoted field (RFC 4180: a field that holds "
            f"a quote is quoted, and the quote inside it is doubled)")
    if records.unclosed_quote:
        return ValueError(
            f"{path}, line {int(records.lines[-1])}: a quote in this record is never closed "
            f"(RFC 4180: a quoted field ends with a quote, and a quote inside it is doubled)")
    bad = np.flatnonzero(records.fields != width) if width is not None else np.zeros(0, int)
    if bad.size:
        i = int(bad[0])
        hint = (" (this record holds quotes: a field with a quote must be quoted and the quote "
                "doubled, RFC 4180)" if records.quoted[i] else "")
        text = data[records.starts[i]: records.stops[i]].decode("utf-8", errors="replace")
        shown = text if len(text) <= 80 else text[:77] + "..."
        what = "the header" if i == 0 else repr(shown)
        return ValueError(
            f"{path}, line {int(records.lines[i])}: {int(records.fields[i])} fields, expected "
            f"{width}{hint}: {what}")
    return None
