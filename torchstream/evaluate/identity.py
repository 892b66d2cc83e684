"""What identifies a run, so that a checkpoint is resumed only by the same run.

A run's identity is a nested dict of plain values, stored in every checkpoint:

- ``stream``: name, task, length, columns, known drifts, fixed classes, the stream's ``source``
  (a file's path, size and SHA-256 of its first MiB, see :func:`file_identity`) and a SHA-256 of
  its first rows (:data:`FINGERPRINT_ROWS` rows, encoded) — so another seed or another stream
  of the same width is told apart even when every name matches;
- the protocol: batch size, strategy, pre-training, label delay;
- every predictor's and plug-in's class and settings (its public scalar attributes when the
  run is built, running counters and seeds left out);
- what the caller adds (``config``: e.g. the model spec and seed of ``torchstream run``) and the
  package version.

:func:`differences` lists every key whose value differs, one line each.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path

import torch

from torchstream.streams.base import Stream

__all__ = ["FINGERPRINT_ROWS", "differences", "file_identity", "plain_config", "settings",
           "stream_identity"]

FINGERPRINT_ROWS = 256
#: Attributes that are state a checkpoint restores, not settings: counters of what an object
#: has seen, and seeds (the generators they started are part of the state).
RUNNING = frozenset({"n_samples_seen", "n_seen", "n_batches", "n_explained", "n_updates",
                     "n_steps", "classes_", "drift_detected", "position", "step", "seed"})
Plain = str | int | float | bool | None


def file_identity(path: str | os.PathLike[str], head: int = 2**20) -> dict[str, Plain]:
    """A data file's resolved path, size and SHA-256 of its first ``head`` bytes."""
    p = Path(path).resolve()
    with p.open("rb") as fh:
        digest = hashlib.sha256(fh.read(head)).hexdigest()
    return {"path": str(p), "size": p.stat().st_size, "sha256_first_mib": digest}


def stream_identity(stream: Stream) -> dict[str, object]:
    """Names, shape and a fingerprint of the stream's first rows (see the module docstring)."""
    digest = hashlib.sha256()
    for X, y in stream.batches(FINGERPRINT_ROWS, stop=FINGERPRINT_ROWS, dtype=torch.float64):
        digest.update(X.cpu().contiguous().numpy().tobytes())
        digest.update(y.cpu().to(torch.float64).contiguous().numpy().tobytes())
    fixed = getattr(stream, "_fixed_classes", False)
    return {
        "name": stream.name,
        "task": stream.task,
        "n_samples": stream.n_samples,
        "n_features": stream.n_features,
        "columns": [str(c) for c in stream.schema.columns],
        "drift_positions": list(stream.drift_positions),
        "classes": [repr(c) for c in stream.classes] if fixed and stream.classes else None,
        "source": dict(getattr(stream, "source", None) or {}),
        "first_rows_sha256": digest.hexdigest(),
    }


_SKIP = object()  # a value that is not a setting (an object, a long list)


def _plain(value: object) -> object:
    """A setting as a plain value that compares by meaning; :data:`_SKIP` when it is none."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return repr(value)  # nan == nan, and 0.1 stays 0.1
    if isinstance(value, (list, tuple)) and len(value) <= 1000:
        items = [_plain(v) for v in value]
        return items if all(v is not _SKIP for v in items) else _SKIP
    return _SKIP


def plain_config(value: object) -> object:
    """A caller's config with every leaf a plain value (``repr`` for anything else)."""
    if isinstance(value, Mapping):
        return {str(k): plain_config(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain_config(v) for v in value]
    if value is None or isinstance(value, (bool, int, str)):
        return value
    return repr(value)


def settings(obj: object) -> dict[str, object]:
    """An object's class and its public plain attributes, running counters and seeds left out."""
    out: dict[str, object] = {"class": f"{type(obj).__module__}.{type(obj).__qualname__}"}
    for key, value in sorted(getattr(obj, "__dict__", {}).items()):
        if key.startswith("_") or key in RUNNING:
            continue
        plain = _plain(value)
        if plain is not _SKIP:
            out[key] = plain
    module = getattr(obj, "module", None)
    if isinstance(module, torch.nn.Module):
        out["module"] = {name: list(p.shape) for name, p in module.named_parameters()}
    return out


def differences(saved: Mapping[str, object], current: Mapping[str, object],
                prefix: str = "") -> list[str]:
    """One line per differing key: ``key: checkpoint <a>, this run <b>``, or ``key: only in the
    checkpoint`` / ``only in this run`` for a whole part that one side lacks."""
    out: list[str] = []
    for key in list(saved) + [k for k in current if k not in saved]:
        name = f"{prefix}.{key}" if prefix else str(key)
        if key not in current:
            out.append(f"{name}: only in the checkpoint")
        elif key not in saved:
            out.append(f"{name}: only in this run")
        else:
            a, b = saved[key], current[key]
            if isinstance(a, Mapping) and isinstance(b, Mapping):
                out.extend(differences(a, b, name))
            elif a != b:
                out.append(f"{name}: checkpoint {_short(a)}, this run {_short(b)}")
    return out


def _short(value: object, width: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."
