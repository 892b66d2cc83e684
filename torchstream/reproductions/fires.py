"""FIRES-GLM (Probit head) selecting features for an online perceptron on Spambase, with the
paper's protocol (KDD 2020, Tables 3 and 4): prequential, batch sizes {25, 50, 75, 100} x
selected fractions {0.1, 0.15, 0.2}, stability window 10; mean accuracy and mean stability next to
the published 0.742 and 0.901.

    torchstream reproduce fires [--quick]
    run("fires", quick=True, data="path/to/spambase.csv")  # torchstream.reproductions.run

The perceptron is river's (``linear_model.Perceptron``, learning rate 1) where the paper used
scikit-multiflow's ``PerceptronMask``; unselected features are set to 0 (the column is kept), as
in the reference pipeline. FIRES: mu = 0, sigma = 1 at the start, learning rates 0.01, one
epoch per batch, lambda_s = lambda_r = 0.01.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np
import torch
from river import linear_model

from torchstream.evaluate import Accuracy, Evaluator
from torchstream.learners import RiverLearner
from torchstream.models.distributional import ProbitHead
from torchstream.reproductions._comparison import Comparison
from torchstream.select import FIRES, FIRESSelector
from torchstream.sinks import History
from torchstream.streams import read_csv, shared_data

#: Shared data files this reproduction reads.
DATA = ("spambase.csv",)

PUBLISHED = {"accuracy": 0.742, "stability": 0.901}

#: Quick mode runs one cell of the grid (batch 50, fraction 0.1) instead of the mean over the 12
#: cells. Over the full grid the cells spread 0.724-0.768 in accuracy and 0.898-0.974 in
#: stability here, so a single cell may sit that far from the grid mean: tolerances 0.03 and 0.05.
TOLERANCE = {"accuracy": 0.03, "stability": 0.05}
QUICK_GRID = [(50, 0.1)]
FULL_GRID = [(b, f) for b in (25, 50, 75, 100) for f in (0.1, 0.15, 0.2)]


def one_run(stream, batch_size: int, fraction: float) -> tuple[float, float, float]:
    d = stream.n_features
    k = max(1, round(fraction * d))
    fires = FIRES(ProbitHead(d, lr_mu=0.01, lr_sigma=0.01, epochs=1), n_selected=k,
                  lambda_s=0.01, lambda_r=0.01)
    selector = FIRESSelector(fires, baseline=0.0, stability_window=10, log_weights=False)
    learner = RiverLearner.for_stream(linear_model.Perceptron(), stream)
    history = History()
    t0 = time.perf_counter()
    result = Evaluator(learner, stream, batch_size=batch_size, metrics=[Accuracy()],
                       plugins=[selector], sinks=[history], record_steps=False).run()
    seconds = time.perf_counter() - t0
    stab = [v for v in history.values("fires/stability") if not math.isnan(v)]
    return result.metrics["accuracy"], float(np.mean(stab)), 1000 * seconds / result.n_steps


def grid_means(grid, path=None, echo=None) -> dict[str, float]:
    torch.set_num_threads(1)
    stream = (read_csv(path, "class", task="classification") if path
              else shared_data("spambase"))
    accs, stabs = [], []
    for b, f in grid:
        acc, stab, ms = one_run(stream, b, f)
        accs.append(acc)
        stabs.append(stab)
        if echo:
            echo(f"{b:>6}{f:>10.2f}{acc:>10.4f}{stab:>11.4f}{ms:>9.2f}")
    return {"accuracy": float(np.mean(accs)), "stability": float(np.mean(stabs))}


def reproduce(quick: bool = True, *, data: str | None = None,
              echo: Callable[[str], None] | None = None) -> list[Comparison]:
    """Mean accuracy and stability over the grid (quick: one cell) on ``data`` (default: the
    shared ``spambase.csv``); ``echo`` receives one line per grid cell."""
    ours = grid_means(QUICK_GRID if quick else FULL_GRID, data, echo)
    why = "one grid cell (quick)" if quick else "mean over the 12 grid cells"
    return [Comparison("mean accuracy", ours["accuracy"], PUBLISHED["accuracy"],
                       TOLERANCE["accuracy"], why),
            Comparison("mean stability (r=10)", ours["stability"], PUBLISHED["stability"],
                       TOLERANCE["stability"], why)]
