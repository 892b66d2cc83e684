"""A shared data set as numbers, the way the papers' scripts read it: every non-numeric column,
and the target, replaced by the index of its value in sorted order."""

from __future__ import annotations

import numpy as np
import pandas as pd

from torchstream.streams import data_path

__all__ = ["coded_table"]


def coded_table(name: str, target: str) -> tuple[np.ndarray, np.ndarray]:
    """``X [n, d]`` (float64) and ``y [n]`` (class codes) of ``<data>/<name>.csv``."""
    frame = pd.read_csv(data_path(f"{name}.csv"))
    y = pd.factorize(frame.pop(target), sort=True)[0]
    for col in frame.columns:
        if not pd.api.types.is_numeric_dtype(frame[col]):
            frame[col] = pd.factorize(frame[col], sort=True)[0]
    return frame.to_numpy(dtype=np.float64), y
