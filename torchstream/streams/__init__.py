"""Streams: rows at the edge, tensor batches inside; synthetic streams with known drifts."""

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
