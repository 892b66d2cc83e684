"""iPDP on elec2 as a drift detector and on California housing against the batch PDP (iPDP
paper, §4.1 and §4.3).

    python scripts/reproduce_ipdp.py [--quick]

elec2 (``../shared/data/electricity.csv``): the iPDP of ``vicprice`` (alpha = 0.001, 10 grid
points between the 5 % and 95 % quantiles of the frequency storage) of an online model learned
test-then-train, its PDP importance score (sd of the PD values) fed to ADWIN
(:class:`~torchstream.drift.PDPDriftDetector`). The paper's ARF (10 trees) detected changes at
22,293, 35,893 and 43,957 observations; the full mode uses river's ARF with 10 trees, the
quick mode an online MLP (32 hidden units) in batches of 10 rows.

California housing (``../shared/data/california_housing.csv``, numeric features standard-scaled,
log10 target): a scikit-learn MLP (50, 100, 5) trained on 70 %, then the iPDP of ``longitude``
(alpha = 0.01, 20 points between the data's min and max) on the 30 % test rows in random order,
against scikit-learn's batch ``partial_dependence`` on the same points; the paper shows the two
as "almost identical" (no number).
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from torchstream.drift import PDPDriftDetector
from torchstream.evaluate import Prequential
from torchstream.explain import IncrementalPDP
from torchstream.reproduce import Comparison
from torchstream.streams import data_path, read_csv

#: Shared data files this reproduction reads.
DATA = ("electricity.csv", "california_housing.csv")

PAPER_DETECTIONS = (22_293, 35_893, 43_957)
#: vicprice is constant up to row 17,424 of this file, so its PD is flat and no detection may
#: come before (the paper: "no effect before about 22k"). When the first detection comes after
#: that depends on when the model starts to use the feature: the paper's ARF fired at 22,293;
#: an online MLP fired at 26,390 (batches of 10) and at 17,685 (row by row) here. That number
#: is reported, not checked; the check is that nothing fires while the feature is constant.
VICPRICE_ONSET = 17_424
#: The iPDP's EMA over n = 6,192 test rows with alpha = 0.01 has sd sqrt(alpha / 2) ~ 0.07 of the
#: ICE spread at each point; relative to the PD's range that is a few per cent: tolerance 0.1.
PDP_TOLERANCE = 0.1


def elec2_detections(quick: bool) -> list[int]:
    torch.set_num_threads(1)
    stream = read_csv(data_path("electricity.csv"), "class", task="classification")
    columns = list(stream.schema.columns)
    feature = columns.index("vicprice")
    explainer = IncrementalPDP(None, feature, grid_size=10, alpha=0.001, grid="quantile",
                               output_index=1, feature_name="vicprice", seed=0)
    detector = PDPDriftDetector(explainer)
    if quick:
        from torchstream.learners import OnlineLearner
        from torchstream.models import MLP

        learner = OnlineLearner(lambda d, k: MLP(d, k, hidden=(32,)), lr=5e-3, seed=0,
                                scale_inputs=True)
        batch = 10
    else:
        from river import forest

        from torchstream.learners import RiverLearner

        learner = RiverLearner.for_stream(forest.ARFClassifier(n_models=10, seed=0), stream)
        batch = 10
    Prequential(learner, stream, batch_size=batch, plugins=[detector],
                record_steps=False).run()
    return list(detector.drift_positions)


def california_gap(quick: bool) -> float:
    from sklearn.inspection import partial_dependence
    from sklearn.model_selection import train_test_split
    from sklearn.neural_network import MLPRegressor
    from sklearn.preprocessing import StandardScaler

    from torchstream.learners import SklearnModelFn

    stream = read_csv(data_path("california_housing.csv"), "median_house_value",
                      task="regression")
    X, y = next(stream.batches(10**6, dtype=torch.float64))
    columns = list(stream.schema.columns)
    keep = [i for i, c in enumerate(columns) if not c.startswith(("ocean_proximity",
                                                                  "total_bedrooms"))]
    X = X[:, keep].numpy()
    names = [columns[i] for i in keep]
    Xtr, Xte, ytr, _ = train_test_split(X, np.log10(y.numpy()), test_size=0.3, random_state=0)
    scaler = StandardScaler().fit(Xtr)
    Xtr, Xte = scaler.transform(Xtr), scaler.transform(Xte)
    model = MLPRegressor(hidden_layer_sizes=(50, 100, 5), random_state=0, max_iter=60 if quick else 200,
                         early_stopping=True).fit(Xtr, ytr)
    j = names.index("longitude")
    lo, hi = float(Xte[:, j].min()), float(Xte[:, j].max())
    explainer = IncrementalPDP(SklearnModelFn(model), j, grid_size=20, alpha=0.01, grid="fixed",
                               fixed_range=(lo, hi), seed=0)
    order = np.random.default_rng(0).permutation(len(Xte))
    Xs = torch.tensor(Xte[order])
    step = 16 if quick else 1  # a fixed model: a batch equals its rows one by one (closed form)
    for start in range(0, len(Xs), step):
        explainer.explain(Xs[start:start + step])
    grid, ours = explainer.grid.numpy(), explainer.pd.numpy()
    batch = partial_dependence(model, Xte, [j], grid_resolution=20, kind="average",
                               custom_values={j: grid})["average"][0]
    return float(np.abs(ours - batch).max() / (batch.max() - batch.min()))


def reproduce(quick: bool = True) -> list[Comparison]:
    detections = elec2_detections(quick)
    first = float(detections[0]) if detections else float("nan")
    early = sum(p < VICPRICE_ONSET for p in detections)
    model = "online MLP in place of the ARF" if quick else "river ARF, 10 trees"
    rows = [Comparison("elec2: detections while vicprice is constant", float(early), 0.0, 0.0,
                       "the PD of a constant feature is flat"),
            Comparison("elec2: first vicprice iPDP drift detection (row)", first,
                       PAPER_DETECTIONS[0], None,
                       f"{model}; all detections: {detections[:8]}")]
    rows.append(Comparison("california: max |iPDP - batch PDP| / PD range", california_gap(quick),
                           0.0, PDP_TOLERANCE, "the paper: 'almost identical'"))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    for r in reproduce(args.quick):
        print(f"{r.measure:<52}{r.ours:>10.3f}  (paper {r.paper:g})  {r.why}")


if __name__ == "__main__":
    main()
