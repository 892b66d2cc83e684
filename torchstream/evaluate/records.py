"""Per-step records of an evaluation run, kept in bounded memory.

A record is a flat dict (step, start, predictor, instance, seconds, per-step metrics). The
records of a step are collected in :attr:`StepRecords.pending` while the step runs and committed
when it ends, either

* to a CSV file (``path``): one line per record appended, the header first; nothing but the
  current step stays in memory, and a checkpoint holds only the file's length and the CRC-32 of
  its bytes. Resuming truncates the file to that length, so a resumed run's file equals the
  file of a run that was never interrupted (the measured seconds aside); or
* to an in-memory window of the last ``max_records`` records (default
  :data:`DEFAULT_MAX_RECORDS`); older records are dropped and counted in
  :attr:`StepRecords.n_dropped`. A checkpoint holds the window (bounded).
"""

from __future__ import annotations

import csv
import io
import os
import shutil
import warnings
import zlib
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, overload

import pandas as pd

__all__ = ["DEFAULT_MAX_RECORDS", "RecordFile", "StepRecords"]

#: Records kept in memory when they are not written to a file (about 0.5 kB each).
DEFAULT_MAX_RECORDS = 10_000

Record = dict[str, Any]


class StepRecords:
    """The per-step records of a run: a CSV file or a bounded in-memory window.

    Parameters
    ----------
    path
        CSV file the records are appended to (made absolute: a checkpoint names it); None:
        keep them in memory.
    max_records
        Size of the in-memory window (without ``path``): the last ``max_records`` records are
        kept, older ones dropped (:attr:`n_dropped` counts them).
    enabled
        False: keep nothing (every call is a no-op).

    A fresh run replaces an existing file at ``path`` (with a warning); a run resumed from
    :meth:`state_dict` continues the file it was checkpointed with.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *,
                 max_records: int = DEFAULT_MAX_RECORDS, enabled: bool = True) -> None:
        if not isinstance(max_records, int) or isinstance(max_records, bool) or max_records < 1:
            raise ValueError(f"max_records must be an integer >= 1, got {max_records!r}")
        self.path = None if path is None else Path(os.path.abspath(path))
        if self.path is not None and self.path.is_dir():
            raise ValueError(f"records path {str(self.path)!r} is a directory; give a file "
                             "such as <dir>/steps.csv")
        self.max_records = max_records
        self.enabled = bool(enabled)
        #: The records of the step in progress (completed by the runner, then committed).
        self.pending: list[Record] = []
        #: Records committed so far, dropped ones included.
        self.n_total = 0
        self._window: deque[Record] = deque(maxlen=max_records)
        self.columns: list[str] | None = None
        self._fh: Any = None
        self._offset = 0  # bytes of the file that belong to this run
        self._crc = 0  # CRC-32 of those bytes
        self._continues = False  # the file continues a checkpointed run
        self._carry: list[Record] = []  # records to write first (resumed from a window)

    # ------------------------------------------------------------------ recording
    def add(self, record: Record) -> None:
        """A record of the step in progress."""
        if self.enabled:
            self.pending.append(record)

    def commit(self) -> None:
        """The step is complete: its records go to the file or the window."""
        if not self.pending:
            return
        rows, self.pending = self.pending, []
        if self.columns is None:
            self.columns = list(rows[0])
        for row in rows:
            if list(row) != self.columns:
                raise ValueError(f"record of step {row.get('step')!r} has the fields {list(row)}, "
                                 f"the earlier records {self.columns}")
        if self.path is None:
            self._window.extend(rows)
        else:
            self._write(rows)
        self.n_total += len(rows)

    @property
    def n_dropped(self) -> int:
        """Records dropped by the in-memory window (0 with a file)."""
        return 0 if self.path is not None else self.n_total - len(self._window)

    def __len__(self) -> int:
        """The records that can be read back."""
        return self.n_total if self.path is not None else len(self._window)

    def rows(self) -> list[Record] | RecordFile:
        """The records: a list (in memory) or a :class:`RecordFile` view of the file."""
        if self.path is None:
            return list(self._window)
        self.flush()
        return RecordFile(self.path, self.n_total)

    # ------------------------------------------------------------------ the file
    def _open(self) -> None:
        assert self.path is not None
        if self._continues:
            self._fh = open(self.path, "r+b")  # noqa: SIM115 - kept open for the run
            self._fh.seek(self._offset)
            self._fh.truncate()
            return
        if self.path.exists() and self.path.stat().st_size > 0:
            warnings.warn(f"records file {str(self.path)!r} exists "
                          f"({self.path.stat().st_size:,} bytes); this new run replaces it",
                          stacklevel=4)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.path, "wb")  # noqa: SIM115 - kept open for the run
        self._offset = self._crc = 0
        self._continues = True
        assert self.columns is not None
        self._append(_csv_lines([self.columns]))
        if self._carry:
            carry, self._carry = self._carry, []
            self._append(_csv_lines([list(r.values()) for r in carry]))

    def _write(self, rows: Sequence[Record]) -> None:
        if self._fh is None:
            self._open()
        self._append(_csv_lines([list(r.values()) for r in rows]))

    def _append(self, data: bytes) -> None:
        self._fh.write(data)
        self._offset += len(data)
        self._crc = zlib.crc32(data, self._crc)

    def flush(self) -> None:
        """Write buffered lines to the file."""
        if self._fh is not None:
            self._fh.flush()

    def close(self) -> None:
        """Flush and close the file (a later commit reopens it and appends)."""
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, object]:
        """Bounded state: the file's length and CRC-32, or the window (flushes the file)."""
        if not self.enabled:
            return {"kind": "none"}
        if self.path is None:
            return {"kind": "window", "n_total": self.n_total, "columns": self.columns,
                    "rows": [dict(r) for r in self._window]}
        self.flush()
        return {"kind": "file", "n_total": self.n_total, "columns": self.columns,
                "path": str(self.path), "offset": self._offset, "crc32": self._crc}

    def check_state(self, state: Mapping[str, Any] | Sequence[Record]) -> None:
        """Raise ``ValueError`` if :meth:`load_state_dict` cannot continue from ``state``
        (nothing is changed)."""
        self._plan(_as_state(state))

    def load_state_dict(self, state: Mapping[str, Any] | Sequence[Record]) -> None:
        """Continue from :meth:`state_dict`: the window is restored, or the file checked against
        the length and CRC-32 of the checkpoint (and truncated to that length when the run goes
        on). A checkpoint whose file is elsewhere has that file's records copied to ``path``."""
        state = _as_state(state)
        copy_from = self._plan(state)  # every check before any change
        self.pending = []
        if not self.enabled:
            return
        self.close()
        self._window.clear()
        self._carry, self._continues, self._offset, self._crc = [], False, 0, 0
        kind = state["kind"]
        if kind == "none":
            self.n_total, self.columns = 0, None
            warnings.warn("the checkpoint was written without per-step records; the records of "
                          "this run start at the resumed step", stacklevel=3)
            return
        self.columns = None if state["columns"] is None else list(state["columns"])
        self.n_total = int(state["n_total"])
        if kind == "window":
            rows = [dict(r) for r in state["rows"]]
            if self.path is None:
                self._window = deque(rows, maxlen=self.max_records)
                return
            if self.n_total > len(rows):
                warnings.warn(
                    f"the checkpoint kept its last {len(rows):,} of {self.n_total:,} records in "
                    f"memory; {str(self.path)!r} starts with those {len(rows):,}", stacklevel=3)
            self.n_total, self._carry = len(rows), rows
            return
        offset, crc = int(state["offset"]), int(state["crc32"])
        if offset == 0:  # nothing was written: a fresh file
            return
        assert self.path is not None
        if copy_from is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            _copy_prefix(copy_from, self.path, offset)
            warnings.warn(f"the first {self.n_total:,} records were copied from "
                          f"{str(copy_from)!r} to {str(self.path)!r}", stacklevel=3)
        self._offset, self._crc, self._continues = offset, crc, True

    def _plan(self, state: Mapping[str, Any]) -> Path | None:
        """Check ``state``; the file to copy the checkpoint's records from, if any."""
        kind = state.get("kind")
        if kind not in ("none", "window", "file"):
            raise ValueError(f"unknown kind of records in the checkpoint: {kind!r}")
        if not self.enabled or kind != "file" or int(state["offset"]) == 0:
            return None
        offset, crc, origin = int(state["offset"]), int(state["crc32"]), Path(state["path"])
        if self.path is None:
            raise ValueError(
                f"the checkpoint's {int(state['n_total']):,} records are in the file "
                f"{str(origin)!r}; resume with records_path= (that file, or a new one to copy "
                "them to)")
        if _prefix_matches(self.path, offset, crc):
            return None
        if (origin != self.path and not (self.path.exists() and self.path.stat().st_size > 0)
                and _prefix_matches(origin, offset, crc)):
            return origin
        raise ValueError(
            f"records file {str(self.path)!r} does not hold the checkpoint's records: expected "
            f"its first {offset:,} bytes to have CRC-32 {crc:#010x} (written to {str(origin)!r});"
            " restore that file or resume with records_path= pointing to it")


def _as_state(state: Mapping[str, Any] | Sequence[Record]) -> Mapping[str, Any]:
    """A state of :meth:`StepRecords.state_dict`; a plain list of records is a window."""
    if isinstance(state, Mapping):
        return state
    rows = list(state)
    return {"kind": "window", "n_total": len(rows),
            "columns": list(rows[0]) if rows else None, "rows": rows}


class RecordFile(Sequence[Record]):
    """The first ``n`` records of a CSV file written by :class:`StepRecords`, read on use."""

    def __init__(self, path: str | os.PathLike[str], n: int) -> None:
        self.path, self.n = Path(path), n
        self._rows: list[Record] | None = None

    def frame(self) -> pd.DataFrame:
        """The records as a DataFrame (the file's columns and values, floats exact)."""
        if self.n == 0:
            return pd.DataFrame()
        with open(self.path, newline="") as fh:
            columns = next(csv.reader(fh))
        text = {c: str for c in ("predictor",) if c in columns}
        # pandas 3 parses floats exactly by default (and deprecates the option)
        exact = {} if int(pd.__version__.split(".")[0]) >= 3 else {"float_precision": "round_trip"}
        return pd.read_csv(self.path, nrows=self.n, dtype=text, keep_default_na=False, **exact,
                           na_values={c: ["nan"] for c in columns if c not in text})

    def _all(self) -> list[Record]:
        if self._rows is None:
            self._rows = self.frame().to_dict("records")
        return self._rows

    def __len__(self) -> int:
        return self.n

    @overload
    def __getitem__(self, i: int) -> Record: ...
    @overload
    def __getitem__(self, i: slice) -> list[Record]: ...
    def __getitem__(self, i: int | slice) -> Record | list[Record]:
        return self._all()[i]

    def __iter__(self) -> Iterator[Record]:
        return iter(self._all())

    def __repr__(self) -> str:
        return f"RecordFile({str(self.path)!r}, n={self.n})"


def _csv_lines(rows: Sequence[Sequence[Any]]) -> bytes:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue().encode()


def _prefix_matches(path: Path, size: int, crc: int) -> bool:
    """Whether the file's first ``size`` bytes exist and have CRC-32 ``crc``."""
    try:
        if path.stat().st_size < size:
            return False
        value, left = 0, size
        with open(path, "rb") as fh:
            while left:
                chunk = fh.read(min(left, 1 << 20))
                if not chunk:
                    return False
                value, left = zlib.crc32(chunk, value), left - len(chunk)
        return value == crc
    except OSError:
        return False


def _copy_prefix(src: Path, dst: Path, size: int) -> None:
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        left = size
        while left:
            chunk = fin.read(min(left, 1 << 20))
            fout.write(chunk)
            left -= len(chunk)
    shutil.copymode(src, dst)
