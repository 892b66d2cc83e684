"""Where a command writes, checked before its first row.

- An output never names an input of the command (the stream, a model spec, a sweep config, a
  checkpoint to resume from — only ``--checkpoint`` may name the ``--resume`` file, which is
  read before anything is written), nor another output.
- An existing file at an output path is replaced only when it is a torchstream output of that
  kind (a checkpoint, a run's result JSON, ``steps.csv``, ...), when it is empty (nothing to
  lose), or with ``--overwrite``; a FIFO, a device or a socket is never replaced.
- A run directory and a checkpoint are held by one process at a time
  (:class:`~torchstream.files.PathLock`): a second command on them is refused naming the holder.

Every refusal is one line naming the options and the file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from torchstream.checkpoint import is_checkpoint_file
from torchstream.files import path_kind

__all__ = ["RESULT_KEYS", "Output", "check_outputs", "is_result_json", "read_result_json",
           "run_outputs"]

#: The keys of a run's ``--result-json`` (and a sweep run's ``result.json``).
RESULT_KEYS = ("n_rows", "n_steps", "seconds", "metrics", "explanations", "logdir")


@dataclass(frozen=True)
class Output:
    """A file a command writes: its path, the option that names it (``--checkpoint``), how
    messages name it (``--checkpoint c.pt``, ``--logdir d (its steps.csv)``) and its kind (a
    key of :data:`KINDS`)."""

    path: Path
    flag: str
    label: str
    kind: str


def _json(path: Path) -> object:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        return None


def _first_line(path: Path) -> str:
    with open(path, "rb") as fh:
        return fh.readline(4096).decode("utf-8", "replace")


def read_result_json(path: Path) -> dict[str, object]:
    """A run's result JSON, or ``ValueError`` saying why it is not one (not JSON — e.g. cut
    short —, not an object, keys missing)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not a run result: not UTF-8 text") from None
    except ValueError as e:
        size = path.stat().st_size
        why = "empty" if size == 0 else f"not valid JSON ({e}; {size:,} bytes: cut short?)"
        raise ValueError(f"{path} is not a complete run result: {why}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path} is not a run result: JSON {type(data).__name__}, not an "
                         "object")
    missing = [k for k in RESULT_KEYS if k not in data]
    if missing:
        raise ValueError(f"{path} is not a complete run result: no {', '.join(missing)}")
    return data


def is_result_json(path: Path) -> bool:
    """Whether ``path`` holds a run's result JSON."""
    try:
        read_result_json(path)
    except ValueError:
        return False
    return True


def _is_records(path: Path) -> bool:
    return _first_line(path).startswith("step,start,")


def _is_schema(path: Path) -> bool:
    data = _json(path)
    return isinstance(data, dict) and "columns" in data and "n_encoded" in data


def _is_report_json(path: Path) -> bool:
    data = _json(path)
    return isinstance(data, dict) and "alarms" in data


def _is_report_md(path: Path) -> bool:
    return _first_line(path).rstrip("\r\n") == "# Drift report"


def _is_sweep_table(path: Path) -> bool:
    return _first_line(path).startswith("run_id,")


#: Each kind of output and how an existing file is recognised as one.
KINDS: dict[str, Callable[[Path], bool]] = {
    "checkpoint": is_checkpoint_file,
    "run result": is_result_json,
    "per-step records": _is_records,
    "schema": _is_schema,
    "drift report": _is_report_json,
    "drift report text": _is_report_md,
    "sweep results table": _is_sweep_table,
}


def _same(a: Path, b: Path) -> bool:
    """Whether two paths name the same file (links included); False when one is missing."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def check_outputs(outputs: Sequence[Output], inputs: Sequence[tuple[str, Path]], *,
                  overwrite: bool, may_replace: Mapping[str, str] | None = None) -> None:
    """Raise ``SystemExit("error: ...")`` when an output names an input or another output,
    when it is a FIFO, device or socket, or (without ``overwrite``) when it exists, is not
    empty and is not a torchstream output of its kind. ``inputs`` pairs what names an input (an option,
    ``"--stream"``, or words, ``"sweep config"``) with its file;
    ``may_replace`` maps an output's option to the one input it may name (``--checkpoint`` may
    name the ``--resume`` file)."""
    allowed = dict(may_replace or {})
    for i, out in enumerate(outputs):
        for flag, path in inputs:
            if allowed.get(out.flag) != flag and _same(out.path, path):
                raise SystemExit(f"error: {out.label} is the {flag} input {path}: an output "
                                 "never replaces an input of the run; choose another path")
        for other in outputs[:i]:
            if _same(out.path, other.path) or (
                    os.path.abspath(out.path) == os.path.abspath(other.path)):
                raise SystemExit(f"error: {out.label} and {other.label} are the same file; "
                                 "choose different paths")
        kind = path_kind(out.path)
        if kind == "missing" or kind == "a broken symlink":
            continue
        if kind == "a directory":
            raise SystemExit(f"error: {out.label} is a directory, not a file")
        if kind != "a regular file":
            raise SystemExit(f"error: {out.label} is {kind}; an output is written only to a "
                             "regular file or a new path")
        if not overwrite and out.path.stat().st_size and not KINDS[out.kind](out.path):
            raise SystemExit(f"error: {out.label} exists and is not a torchstream {out.kind}; "
                             "it is not replaced: choose another path, or pass --overwrite to "
                             "replace it")


def run_outputs(checkpoint: str | None, result_json: str | None,
                logdir: str | None) -> list[Output]:
    """The files ``torchstream run`` writes (those in the run directory when ``logdir`` is
    known)."""
    out = []
    if checkpoint:
        out.append(Output(Path(checkpoint), "--checkpoint", f"--checkpoint {checkpoint}",
                          "checkpoint"))
    if result_json:
        out.append(Output(Path(result_json), "--result-json", f"--result-json {result_json}",
                          "run result"))
    if logdir:
        for name, kind in (("steps.csv", "per-step records"), ("schema.json", "schema"),
                           ("report.json", "drift report"), ("report.md", "drift report text")):
            out.append(Output(Path(logdir) / name, "--logdir", f"--logdir {logdir} (its {name})",
                              kind))
    return out
