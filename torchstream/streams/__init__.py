"""Streams: rows at the edge, tensor batches inside; synthetic streams with known drifts.

Each name is imported from its submodule on first use: reading a CSV file does not import the
synthetic streams' river generators (and, through river, scikit-learn).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchstream._lazy import lazy_names

if TYPE_CHECKING:
    from torchstream.streams.base import Stream, infer_task
    from torchstream.streams.synthetic import (
        SEA,
        STAGGER,
        SYNTHETIC,
        Agrawal,
        ConceptDrift,
        Friedman,
        Hyperplane,
        agrawal_drift,
        make_synthetic,
    )
    from torchstream.streams.tabular import (
        SHARED_DATA,
        TableStream,
        data_path,
        from_numpy,
        from_pandas,
        from_river,
        read_csv,
        shared_data,
    )

__all__ = [
    "SEA",
    "SHARED_DATA",
    "STAGGER",
    "SYNTHETIC",
    "Agrawal",
    "ConceptDrift",
    "Friedman",
    "Hyperplane",
    "Stream",
    "TableStream",
    "agrawal_drift",
    "data_path",
    "from_numpy",
    "from_pandas",
    "from_river",
    "infer_task",
    "make_synthetic",
    "read_csv",
    "shared_data",
]

__getattr__, __dir__ = lazy_names(__name__, {
    "torchstream.streams.base": ("Stream", "infer_task"),
    "torchstream.streams.synthetic": (
        "SEA", "STAGGER", "SYNTHETIC", "Agrawal", "ConceptDrift", "Friedman", "Hyperplane",
        "agrawal_drift", "make_synthetic",
    ),
    "torchstream.streams.tabular": (
        "SHARED_DATA", "TableStream", "data_path", "from_numpy", "from_pandas", "from_river",
        "read_csv", "shared_data",
    ),
})
