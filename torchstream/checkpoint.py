"""Checkpoint files that never run code from an untrusted source.

A checkpoint is ``torch.save`` bytes behind a signed header::

    TORCHSTREAM-CHECKPOINT 1\\n
    <hex HMAC-SHA256 of the payload under this user's key>\\n
    <payload: torch.save of the state>

The payload is read with ``torch.load(weights_only=True)``: tensors, numbers, strings, bytes,
lists, tuples, dicts — nothing that can run code. State that has no such form (a river model or
detector, a numpy array) is stored as a *pickled part*, ``{PICKLED: bytes}``, and unpickled only
when the file is trusted:

- the header's HMAC verifies under the key of the user loading it (``key_path()``, 32 random
  bytes made on first use, file mode 0600): the file was written by this user's torchstream
  and not changed since; or
- the caller says so (``trusted=True``, ``--trust-checkpoint``) for a file from elsewhere.

A foreign file without pickled parts loads (weights only is safe). Anything else — a missing,
empty, truncated, tampered or foreign file with pickled parts, a plain ``torch.save`` file —
raises :class:`CheckpointError` with one line that says why, before any state is touched.
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import io
import os
import pickle
import secrets
from collections.abc import Callable, Mapping
from pathlib import Path

import torch

__all__ = [
    "PICKLED",
    "CheckpointError",
    "check_settings",
    "key_path",
    "load_checkpoint",
    "pickled_parts",
    "restore_object",
    "save_checkpoint",
]

MAGIC = b"TORCHSTREAM-CHECKPOINT 1\n"
PICKLED = "__torchstream_pickled__"
_DIGEST = 64  # hex characters of a SHA-256 HMAC

State = object  # nested dicts / lists / tuples of tensors, numbers, strings and objects


class CheckpointError(ValueError):
    """A checkpoint that cannot or must not be loaded (the message is one line)."""


def key_path() -> Path:
    """The user's signing key: ``$TORCHSTREAM_HOME/checkpoint.key`` (default
    ``~/.config/torchstream``; ``$XDG_CONFIG_HOME`` is honoured)."""
    home = os.environ.get("TORCHSTREAM_HOME")
    if home:
        return Path(home) / "checkpoint.key"
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config) / "torchstream" / "checkpoint.key"


def _key() -> bytes:
    """Read the key, creating it (mode 0600, exclusive create) on first use."""
    path = key_path()
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # made by a concurrent process meanwhile
            data = path.read_bytes()
        else:
            data = secrets.token_bytes(32)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
    if len(data) < 32:
        raise CheckpointError(f"checkpoint key {path} is shorter than 32 bytes; remove it to "
                              "make a new one (checkpoints signed with it will need trust)")
    return data


def _sign(payload: bytes) -> bytes:
    return hmac.new(_key(), payload, hashlib.sha256).hexdigest().encode()


def _is_plain(value: object) -> bool:
    return value is None or isinstance(
        value, (bool, int, float, complex, str, bytes, torch.Tensor, torch.Size, torch.dtype,
                torch.device))


def _pack(value: object) -> object:
    """Replace every object that weights-only loading refuses by a pickled part."""
    if _is_plain(value):
        return value
    if type(value) is dict:
        return {k: _pack(v) for k, v in value.items()}
    if type(value) in (list, tuple):
        packed = [_pack(v) for v in value]  # type: ignore[attr-defined]
        return packed if type(value) is list else tuple(packed)
    return {PICKLED: pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)}


def _walk(value: object, leaf: Callable[[bytes, str], object], where: str = "") -> object:
    if isinstance(value, dict):
        if set(value) == {PICKLED} and isinstance(value[PICKLED], bytes):
            return leaf(value[PICKLED], where or "/")
        return {k: _walk(v, leaf, f"{where}/{k}") for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        out = [_walk(v, leaf, f"{where}/{i}") for i, v in enumerate(value)]
        return out if isinstance(value, list) else tuple(out)
    return value


def pickled_parts(state: object) -> list[str]:
    """Where a loaded payload holds pickled parts (``/``-separated key paths)."""
    found: list[str] = []

    def note(blob: bytes, where: str) -> object:
        found.append(where)
        return blob

    _walk(state, note)
    return found


def restore_object(value: object, what: str) -> object:
    """A copy of an object from a state dict; raw pickled bytes are refused, never unpickled
    (only :func:`load_checkpoint` unpickles, and only what it trusts)."""
    if isinstance(value, (bytes, bytearray)):
        raise CheckpointError(f"state of {what} is raw pickled bytes; it is not unpickled "
                              "(load checkpoints with torchstream.checkpoint.load_checkpoint)")
    return copy.deepcopy(value)


def save_checkpoint(state: Mapping[str, object], path: str | os.PathLike[str]) -> str:
    """Write ``state`` signed with the user's key, atomically (a temporary file, then a rename).

    Objects that are not tensors, numbers, strings or containers of them are pickled parts.
    """
    path = Path(path)
    buffer = io.BytesIO()
    torch.save(_pack(dict(state)), buffer)
    payload = buffer.getvalue()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        fh.write(MAGIC + _sign(payload) + b"\n" + payload)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    return str(path)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise CheckpointError(f"checkpoint {path} does not exist") from None
    except IsADirectoryError:
        raise CheckpointError(f"checkpoint {path} is a directory, not a file") from None
    except OSError as e:
        raise CheckpointError(f"checkpoint {path} cannot be read: {e.strerror}") from None


def load_checkpoint(path: str | os.PathLike[str], *, trusted: bool = False) -> dict[str, object]:
    """Read a checkpoint written by :func:`save_checkpoint`.

    Pickled parts are unpickled only when the signature verifies under this user's key or
    ``trusted`` is True; otherwise a file that holds them raises :class:`CheckpointError`.
    """
    path = Path(path)
    data = _read(path)
    if not data:
        raise CheckpointError(f"checkpoint {path} is empty")
    if not data.startswith(MAGIC):
        raise CheckpointError(
            f"{path} is not a torchstream checkpoint (no 'TORCHSTREAM-CHECKPOINT' header); "
            "only files written by torchstream's save are loaded")
    head = len(MAGIC)
    digest, sep, payload = data[head:head + _DIGEST], data[head + _DIGEST:head + _DIGEST + 1], \
        data[head + _DIGEST + 1:]
    if sep != b"\n" or len(digest) != _DIGEST:
        raise CheckpointError(f"checkpoint {path} is truncated or damaged (bad header)")
    signed = hmac.compare_digest(digest, _sign(payload))
    try:
        state = torch.load(io.BytesIO(payload), weights_only=True)
    except Exception as e:  # noqa: BLE001 - the unpickler raises many kinds; all mean the same
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise CheckpointError(f"checkpoint {path} is damaged or not weights-only: "
                              f"{first[:200]}") from None
    if not isinstance(state, dict):
        raise CheckpointError(f"checkpoint {path} does not hold a state dict")
    parts = pickled_parts(state)
    if not parts:
        return state
    if not (signed or trusted):
        shown = ", ".join(parts[:3]) + (f" and {len(parts) - 3} more" if len(parts) > 3 else "")
        raise CheckpointError(
            f"checkpoint {path} holds pickled objects ({shown}) and was not signed with this "
            f"user's key ({key_path()}), so it was written elsewhere or changed; load it only "
            "if you trust its source (--trust-checkpoint / trusted=True)")
    # only here is anything unpickled: parts of a file this user signed, or said to trust
    return _walk(state, lambda blob, where: pickle.loads(blob))  # type: ignore[return-value]


def _settled(value: object) -> object:
    """``value`` with every list turned into a tuple, in nested dicts too (a stored setting may
    come back as a list)."""
    if isinstance(value, (list, tuple)):
        return tuple(_settled(v) for v in value)
    if isinstance(value, dict):
        return {k: _settled(v) for k, v in value.items()}
    return value


def check_settings(
    state: Mapping[str, object], own: Mapping[str, object], owner: str, *, stored: str = "has"
) -> None:
    """Raise ``ValueError`` unless ``state`` stores every setting of ``own`` with the same value
    (lists and tuples compare alike); the message names the first that differs:
    ``state <stored> key=theirs, this <owner> has key=mine``.

    >>> check_settings({"depth": 3, "hidden": [4]}, {"depth": 3, "hidden": (4,)}, "tree")
    >>> check_settings({"depth": 2}, {"depth": 3}, "tree")
    Traceback (most recent call last):
    ...
    ValueError: state has depth=2, this tree has depth=3
    """
    for key, mine in own.items():
        theirs = state.get(key)
        if _settled(theirs) != _settled(mine):
            raise ValueError(f"state {stored} {key}={theirs!r}, this {owner} has {key}={mine!r}")
