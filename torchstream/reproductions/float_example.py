"""The float paper's example: a Hoeffding tree on Spambase, prequential, batch size 25, with
zero-one loss and noise variability (15 draws, N(0, 0.1^2)), next to the published values.

    torchstream reproduce float_example
    run("float_example", data="path/to/spambase.csv", n_pretrain=100)  # reproductions.run

float ran scikit-multiflow's HoeffdingTreeClassifier; we run river's, whose defaults (grace
period 200, delta 1e-7, tie threshold 0.05, Gaussian leaf splitters, naive-Bayes-adaptive leaf
predictions) follow the same algorithm, so the numbers agree only approximately.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch
from river import tree

from torchstream.evaluate import Evaluator
from torchstream.evaluate.noise import NoiseVariability
from torchstream.learners import RiverLearner
from torchstream.reproductions._comparison import Comparison
from torchstream.streams import read_csv, shared_data

#: Shared data files this reproduction reads.
DATA = ("spambase.csv",)

PUBLISHED = {"zero_one_loss": 0.1806, "noise_variability": 0.2419}

#: Quick mode is the whole run (4,601 rows). Tolerances: river's tree is not scikit-multiflow's
#: (other split-candidate estimators and leaf predictions), so the per-step error and the noise
#: sensitivity of the two trees differ by a few points; 0.03 is about 3 standard errors of a mean
#: over 181 batch scores of sd ~0.08 plus the model difference observed here (0.008 / 0.010).
TOLERANCE = {"zero_one_loss": 0.03, "noise_variability": 0.03}


def evaluate(path: str | None = None, n_pretrain: int = 100) -> tuple[dict[str, float], Any]:
    torch.set_num_threads(1)
    stream = (read_csv(path, "class", task="classification") if path
              else shared_data("spambase"))
    learner = RiverLearner.for_stream(tree.HoeffdingTreeClassifier(), stream)
    nv = NoiseVariability("zero_one", n_samples=15, noise_scale=0.1, seed=0)
    t0 = time.perf_counter()
    result = Evaluator(learner, stream, batch_size=25, n_pretrain=n_pretrain,
                       plugins=[nv]).run()
    result.seconds = time.perf_counter() - t0
    steps = result.to_frame()
    ours = {"zero_one_loss": float(np.mean(1 - steps["accuracy"])),
            "noise_variability": float(np.mean(nv.values))}
    return ours, result


def reproduce(quick: bool = True, *, data: str | None = None,
              n_pretrain: int = 100) -> list[Comparison]:
    """Zero-one loss and noise variability on ``data`` (default: the shared ``spambase.csv``)
    after ``n_pretrain`` rows (float's default: 100); ``quick`` is the same run (it is short)."""
    ours, _ = evaluate(data, n_pretrain)
    return [Comparison(f"mean {k} per step", ours[k], PUBLISHED[k], TOLERANCE[k],
                       "river's Hoeffding tree in place of scikit-multiflow's")
            for k in PUBLISHED]
