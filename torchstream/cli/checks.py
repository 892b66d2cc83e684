"""Checks of command-line options made before a row is read or a file is written; a bad
value is a one-line ``SystemExit("error: ...")`` naming the option."""

from __future__ import annotations

import os
from pathlib import Path

import torch

__all__ = ["check_device", "check_output_path"]


def check_device(device: str) -> None:
    """``auto``, ``cpu`` or a CUDA device that exists here; anything else is a usage error."""
    if device == "auto" or device == "cpu":
        return
    try:
        parsed = torch.device(device)
    except RuntimeError:
        raise SystemExit(f"error: --device {device!r} is not a device; use cpu, cuda, cuda:N "
                         "or auto") from None
    if parsed.type == "cuda":
        if not torch.cuda.is_available():
            raise SystemExit(f"error: --device {device}: CUDA is not available on this machine "
                             "(use cpu or auto)")
        if parsed.index is not None and parsed.index >= torch.cuda.device_count():
            raise SystemExit(f"error: --device {device}: this machine has "
                             f"{torch.cuda.device_count()} CUDA device(s)")
    elif parsed.type != "cpu":
        raise SystemExit(f"error: --device {device!r} is not supported; use cpu, cuda, cuda:N "
                         "or auto")


def check_output_path(path: str, flag: str, *, directory: bool = False) -> None:
    """An output path that can be written: not a directory for a file (nor a file for a
    directory), and its nearest existing parent a writable directory."""
    p = Path(path)
    if p.exists():
        if directory and not p.is_dir():
            raise SystemExit(f"error: {flag} {path} is a file, not a directory")
        if not directory and p.is_dir():
            raise SystemExit(f"error: {flag} {path} is a directory, not a file")
        if not os.access(p, os.W_OK):
            raise SystemExit(f"error: {flag} {path} is not writable")
        return
    parent = p.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise SystemExit(f"error: {flag} {path}: {parent} is a file, not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise SystemExit(f"error: {flag} {path}: cannot create files in {parent}")
