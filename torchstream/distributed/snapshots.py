"""The driver's side of a sweep on Ray: the latest snapshot of each run (its run directory with
its checkpoint, as tar bytes), how often each run started, and the events the driver has not
read yet. :mod:`torchstream.cli.sweep_ray` runs it as an actor on the driver's node, where it
outlives the loss of any other node; this module imports only the standard library, so that the
actor starts in a fraction of a second.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

__all__ = ["SnapshotStore"]


class SnapshotStore:
    """Each run's latest snapshot (bytes), how often each run started, and the events not read
    yet: ``("started", run id, attempt, where)`` and ``("snapshot", run id, version,
    {"bytes": size})``.

    >>> store = SnapshotStore()
    >>> store.start("a", {"node_id": "n1"}), store.put("a", b"tar"), store.start("a", {})
    (1, 1, 2)
    >>> store.latest("a"), store.latest("b"), [e[:3] for e in store.events()], store.events()
    (b'tar', None, [('started', 'a', 1), ('snapshot', 'a', 1), ('started', 'a', 2)], [])
    """

    def __init__(self) -> None:
        self._snapshots: dict[str, tuple[int, bytes]] = {}
        self._starts: Counter[str] = Counter()
        self._events: list[tuple[str, str, int, dict[str, Any]]] = []

    def start(self, run_id: str, where: dict[str, Any]) -> int:
        """A run starts (again): its attempt number, from 1."""
        self._starts[run_id] += 1
        self._events.append(("started", run_id, self._starts[run_id], where))
        return self._starts[run_id]

    def put(self, run_id: str, data: bytes) -> int:
        """Keep ``data`` as the run's latest snapshot; its version, from 1."""
        version = self._snapshots.get(run_id, (0, b""))[0] + 1
        self._snapshots[run_id] = (version, data)
        self._events.append(("snapshot", run_id, version, {"bytes": len(data)}))
        return version

    def seed(self, run_id: str, data: bytes) -> None:
        """A snapshot the driver had already (from an earlier sweep), without an event."""
        self._snapshots[run_id] = (0, data)

    def latest(self, run_id: str) -> bytes | None:
        snapshot = self._snapshots.get(run_id)
        return None if snapshot is None else snapshot[1]

    def events(self) -> list[tuple[str, str, int, dict[str, Any]]]:
        """The events since the last call (each is read once)."""
        out, self._events = self._events, []
        return out
