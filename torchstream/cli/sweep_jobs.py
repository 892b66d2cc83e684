"""One run of a sweep, wherever it executes: its ``torchstream run`` arguments, its execution in
the current process, and its run directory as bytes (a tar archive) to carry between machines.

A run's directory ``<root>/<run id>/`` holds ``tensorboard/`` (the events, ``steps.csv``, the
drift report), ``result.json``, ``stdout.txt``, ``sweep_run.json`` (:data:`RUN_INFO`) and, while
the run is unfinished or when the sweep keeps them, ``checkpoint.pt`` (:data:`CHECKPOINT`). A
run with a checkpoint in its directory resumes from it (``--resume``), not from row 0.

:class:`SnapshotWatcher` sends the run directory away each time the run writes its checkpoint,
so that a run whose machine is lost resumes elsewhere from its last checkpoint with the logs
written up to it.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import tarfile
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from typing_extensions import Self

from torchstream.cli.errors import CommandInterrupted, guarded
from torchstream.cli.run import run_command
from torchstream.cli.run_args import run_parser
from torchstream.files import LOCK_NAME

__all__ = ["CHECKPOINT", "RUN_INFO", "Job", "RunSpec", "SnapshotWatcher", "execute", "pack",
           "resumed_row", "unpack"]

#: A run's checkpoint, in its run directory.
CHECKPOINT = "checkpoint.pt"
#: Per run: the status, error and wall time of its last execution, and where it ran.
RUN_INFO = "sweep_run.json"
#: ``torchstream run`` options a sweep config may not set: the sweep sets them itself, or they
#: read or write a run's files (a checkpoint to resume from is never taken from a config).
RESERVED_RUN = frozenset({"logdir", "result_json", "resume", "checkpoint", "checkpoint_every",
                          "trust_checkpoint", "overwrite", "no_progress", "help"})
_KEY = re.compile(r"[a-z][a-z0-9_]*")
_RESUMED = re.compile(r"^resumed from .* at row ([\d,]+)$", re.MULTILINE)


@dataclass(frozen=True)
class RunSpec:
    """One run of the grid: its id and its ``torchstream run`` options."""

    run_id: str
    options: dict[str, Any]

    def argv(self, out: Path) -> list[str]:
        """The ``torchstream run`` arguments. Single values go as ``--option=value`` and list
        items never start with ``-``, so no value is read as an option."""
        args = ["run"]
        for key, value in self.options.items():
            if not isinstance(key, str) or not _KEY.fullmatch(key) or key in RESERVED_RUN:
                raise ValueError(f"run {self.run_id}: option {key!r} cannot be set by a sweep")
            flag = "--" + key.replace("_", "-")
            if isinstance(value, bool):
                if value:
                    args.append(flag)
            elif isinstance(value, list):
                items = [str(v) for v in value]
                bad = [v for v in items if v.startswith("-")]
                if bad:
                    raise ValueError(f"run {self.run_id}: {key} item {bad[0]!r} starts with '-'")
                args += [flag, *items]
            else:
                args.append(f"{flag}={value}")
        run_dir = out / self.run_id
        return args + ["--logdir", str(run_dir / "tensorboard"),
                       "--result-json", str(run_dir / "result.json"), "--no-progress"]


@dataclass(frozen=True)
class Job:
    """A run as the sweep executes it: ``spec``, a checkpoint every ``checkpoint_every``
    batches (None: only a checkpoint it resumes from), and whether a finished run keeps its
    checkpoint (``keep_checkpoint``)."""

    spec: RunSpec
    checkpoint_every: int | None = None
    keep_checkpoint: bool = False

    def argv(self, root: Path) -> list[str]:
        """The arguments of the run in ``root/<run id>``: its checkpoint there, resumed when the
        file exists."""
        argv = self.spec.argv(root)
        checkpoint = root / self.spec.run_id / CHECKPOINT
        if self.checkpoint_every is not None or checkpoint.is_file():
            argv += ["--checkpoint", str(checkpoint)]
        if self.checkpoint_every is not None:
            argv += ["--checkpoint-every", str(self.checkpoint_every)]
        if checkpoint.is_file():
            argv += ["--resume", str(checkpoint)]
        return argv

    def finish(self, run_dir: Path, status: str) -> None:
        """After an execution: a finished run's checkpoint is removed unless it is kept (an
        unfinished or failed run keeps it, to resume from)."""
        if status == "ok" and not self.keep_checkpoint:
            with contextlib.suppress(FileNotFoundError):
                (run_dir / CHECKPOINT).unlink()


def execute(argv: list[str], run_dir: str) -> dict[str, object]:
    """Run one ``torchstream run`` in this process; never raises (errors become the row)."""
    t0 = time.perf_counter()
    Path(run_dir).mkdir(parents=True, exist_ok=True)
    log = io.StringIO()
    try:
        with contextlib.redirect_stdout(log):
            guarded(run_command, run_parser().parse_args(argv))
        status, error = "ok", ""
    except CommandInterrupted:  # Ctrl-C / SIGTERM stop the sweep, not only this run
        raise
    except SystemExit as e:  # the command's one-line message (its str), or its exit status
        status, error = "failed", str(e) or f"exit status {e.code}"
    except Exception as e:  # noqa: BLE001 (a failed run must not stop the grid)
        status, error = "failed", f"{type(e).__name__}: {e}"
        (Path(run_dir) / "traceback.txt").write_text(traceback.format_exc())
    text = log.getvalue()
    (Path(run_dir) / "stdout.txt").write_text(text)
    return {"status": status, "error": error, "wall_seconds": time.perf_counter() - t0,
            "resumed_at_row": resumed_row(text)}


def resumed_row(stdout: str) -> int | None:
    """The row a run resumed at, read from its printed ``resumed from ... at row N`` line;
    None for a run that started at row 0."""
    match = _RESUMED.search(stdout)
    return None if match is None else int(match.group(1).replace(",", ""))


def _transient(name: str) -> bool:
    """Files never carried: lock files and the temporary files of an atomic write."""
    return name == LOCK_NAME or name.endswith(".lock") or (name.startswith(".")
                                                          and name.endswith(".tmp"))


def pack(run_dir: Path, *, checkpoint: bool = True, exclude: Sequence[str] = ()) -> bytes:
    """``run_dir``'s files as an uncompressed tar archive (paths relative to ``run_dir``);
    without ``checkpoint`` the run's :data:`CHECKPOINT` is left out, and so are the files
    ``exclude`` names (paths relative to ``run_dir``). Files the run is still
    appending to are taken at their length when read; a file removed meanwhile is skipped."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for path in sorted(run_dir.rglob("*")):
            rel = path.relative_to(run_dir)
            if not path.is_file() or path.is_symlink() or _transient(path.name):
                continue
            if rel.as_posix() in exclude or (not checkpoint and rel.as_posix() == CHECKPOINT):
                continue
            try:
                with path.open("rb") as fh:
                    info = tar.gettarinfo(arcname=rel.as_posix(), fileobj=fh)
                    tar.addfile(info, fh)
            except FileNotFoundError:
                continue
    return buffer.getvalue()


def unpack(data: bytes, run_dir: Path) -> list[str]:
    """Write the files of a :func:`pack` archive into ``run_dir`` (each atomically, replacing
    a file of the same name) and return their relative paths. An entry that is not a regular
    file or whose path leaves ``run_dir`` is an error naming it."""
    root = run_dir.resolve()
    names = []
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        for member in tar.getmembers():
            target = (root / member.name).resolve()
            if not member.isfile() or root not in target.parents:
                raise ValueError(f"run archive entry {member.name!r} is not a file inside the "
                                 "run directory")
            source = tar.extractfile(member)
            assert source is not None
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".{target.name}.unpack.tmp")
            tmp.write_bytes(source.read())
            os.replace(tmp, target)
            names.append(member.name)
    return names


class SnapshotWatcher:
    """While a run goes on: each time its checkpoint file changes, :func:`pack` its run
    directory (checkpoint included, the files ``exclude`` names left out) and pass the bytes
    to ``send``. ``poll`` seconds between
    looks. A context manager; :attr:`sent` counts the snapshots sent and :attr:`errors` the
    ``send`` calls that failed (the run goes on).

    >>> import tempfile
    >>> run_dir = Path(tempfile.mkdtemp())
    >>> got = []
    >>> with SnapshotWatcher(run_dir, got.append, poll=0.01) as watcher:
    ...     _ = (run_dir / CHECKPOINT).write_bytes(b"state")
    ...     time.sleep(0.2)
    >>> watcher.sent, sorted(tarfile.open(fileobj=io.BytesIO(got[0])).getnames())
    (1, ['checkpoint.pt'])
    """

    def __init__(self, run_dir: Path, send: Callable[[bytes], object], *,
                 exclude: Sequence[str] = (), poll: float = 0.2) -> None:
        self.run_dir, self.send, self.poll = run_dir, send, poll
        self.exclude = tuple(exclude)
        self.sent = 0
        self.errors = 0
        self._stop = threading.Event()
        self._seen = self._stamp()
        self._thread = threading.Thread(target=self._loop, name="snapshot-watcher", daemon=True)

    def _stamp(self) -> tuple[int, int] | None:
        try:
            st = (self.run_dir / CHECKPOINT).stat()
        except FileNotFoundError:
            return None
        return st.st_mtime_ns, st.st_size

    def _loop(self) -> None:
        while not self._stop.wait(self.poll):
            stamp = self._stamp()
            if stamp is None or stamp == self._seen:
                continue
            self._seen = stamp
            try:
                self.send(pack(self.run_dir, exclude=self.exclude))
                self.sent += 1
            except Exception:  # noqa: BLE001 (a lost snapshot must not stop the run)
                self.errors += 1

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()
