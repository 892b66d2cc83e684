"""Checkpoint files that never run code from an untrusted source.

A checkpoint is ``torch.save`` bytes behind a signed header::

    TORCHSTREAM-CHECKPOINT 1\\n
    <hex HMAC-SHA256 of the payload under this user's key>\\n
    <payload: torch.save of the state>

The payload is read with ``torch.load(weights_only=True)``: tensors, numbers, strings, bytes,
lists, tuples, dicts and ordered dicts (a module's, an optimiser's or a scaler's ``state_dict``)
— nothing that can run code. A torch run (learner, optimiser, scalers, explainers) is stored
whole in that form. State that has no such form (a river model or detector, a numpy array) is
stored as a *pickled part*, ``{PICKLED: bytes}``, and unpickled only when the file is trusted:

- the header's HMAC verifies under the key of the user loading it (``key_path()``, 32 random
  bytes made on first use, file mode 0600): the file was written by this user's torchstream
  and not changed since; or
- the caller says so (``trusted=True``, ``--trust-checkpoint``) for a file from elsewhere.

A foreign file without pickled parts loads (weights only is safe). Anything else — a missing,
empty, truncated, tampered or foreign file with pickled parts, a plain ``torch.save`` file, a
FIFO or a device (never opened) — raises :class:`CheckpointError` with one line that says why,
before any state is touched.

The key must be the user's own regular file that nobody else can read or write (a symlink to
such a file is fine); :func:`check_key` checks it (or makes it) before a command's first row,
and every use checks it again. A file is written through a uniquely named temporary file,
then renamed (:func:`torchstream.files.atomic_write`).
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import io
import os
import pickle
import secrets
import stat
from collections import OrderedDict
from collections.abc import Callable, Mapping
from pathlib import Path

import torch

from torchstream.files import atomic_write, path_kind

__all__ = [
    "PICKLED",
    "CheckpointError",
    "check_key",
    "check_settings",
    "is_checkpoint_file",
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


def check_key() -> Path:
    """Check the user's signing key (:func:`key_path`) without signing anything, creating it
    (32 random bytes, mode 0600, exclusive create) when it does not exist; commands call it
    before their first row. Raises :class:`CheckpointError` saying why when the key is not a
    regular file (a FIFO is never opened), a symlink to a missing file, readable or writable by
    other users (also through a symlink), owned by another user, or shorter than 32 bytes."""
    _key()
    return key_path()


def _key() -> bytes:
    """Read the key, creating it (mode 0600, exclusive create) on first use."""
    path = key_path()
    if not os.path.lexists(path):
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:  # made by a concurrent process meanwhile
            pass
        else:
            data = secrets.token_bytes(32)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            return data
    return _read_key(path)


def _read_key(path: Path) -> bytes:
    """The key's bytes once its file is a regular file of this user that nobody else can
    read or write; checked by ``stat`` first, so a FIFO or a device is never opened."""
    name = f"checkpoint key {path}"
    if path.is_symlink():
        target = os.path.realpath(path)
        name += f" (a symlink to {target})"
        if not os.path.exists(target):
            raise CheckpointError(f"{name} points to nothing; remove the link (a new key is "
                                  "made on first use)")
    kind = path_kind(path)
    if kind != "a regular file":
        raise CheckpointError(f"{name} is {kind}, not a regular file; remove it (a new key is "
                              "made on first use)")
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # changed between stat and open
            raise CheckpointError(f"{name} is not a regular file")
        if st.st_uid != os.geteuid():
            raise CheckpointError(f"{name} belongs to another user (uid {st.st_uid}); a key "
                                  "must be your own: remove it (a new key is made on first use)")
        mode = stat.S_IMODE(st.st_mode)
        if mode & 0o077:
            raise CheckpointError(
                f"{name} has mode {mode:04o}: other users can read or change it and so sign "
                "checkpoints that run code here; make it private (chmod 600) and, if others "
                "may have read it, remove it (a new key is made; your older checkpoints then "
                "need --trust-checkpoint)")
        data = os.read(fd, 4096)
    finally:
        os.close(fd)
    if len(data) < 32:
        raise CheckpointError(f"{name} is shorter than 32 bytes; remove it to make a new one "
                              "(checkpoints signed with it will need trust)")
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
    if type(value) is OrderedDict:  # a module's or scaler's state_dict (and its _metadata)
        ordered = OrderedDict((k, _pack(v)) for k, v in value.items())
        metadata = getattr(value, "_metadata", None)
        if metadata is not None:
            ordered._metadata = _pack(metadata)  # type: ignore[attr-defined]
        return ordered
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
    atomic_write(path, MAGIC + _sign(payload) + b"\n" + payload)
    return str(path)


def is_checkpoint_file(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a regular file that starts with the checkpoint header (only its
    first bytes are read; nothing is checked or loaded)."""
    if path_kind(path) != "a regular file":
        return False
    with open(path, "rb") as fh:
        return fh.read(len(MAGIC)) == MAGIC


def _read(path: Path) -> bytes:
    kind = path_kind(path)
    if kind == "missing":
        raise CheckpointError(f"checkpoint {path} does not exist")
    if kind != "a regular file":  # never read: a FIFO would block, /dev/zero never ends
        raise CheckpointError(f"checkpoint {path} is {kind}, not a checkpoint file")
    try:
        return path.read_bytes()
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
