"""Evidently and NannyML on the drift report's evaluation cases: run in an environment of their
own (they are peers measured side by side, never dependencies of torchstream), called by
``scripts/evaluate_drift_report.py --peers PYTHON``.

    PYTHON scripts/drift_peers.py CASES.npz OUT.json

``CASES.npz`` holds, for case ``i``, ``before_i`` and ``after_i`` (the rows of the report's
before and after windows, the inputs as the learner saw them) and ``features_i``. For each case:

* **Evidently** (``Report([DataDriftPreset()])``, current = after window, reference = before
  window, its defaults: a per-column test, Kolmogorov-Smirnov p < 0.05 for a numeric column of
  these sizes; dataset drift when at least half the columns drift): the drifted columns and the
  dataset verdict;
* **NannyML** (``UnivariateDriftCalculator`` with the Kolmogorov-Smirnov method and chunks of
  250 rows: the reference chunks set each column's threshold): a column drifts when at least
  half of the after window's chunks alert on it.
"""

from __future__ import annotations

import json
import os
import sys
import warnings

os.environ.setdefault("NML_DISABLE_USAGE_LOGGING", "1")  # no network: no usage reports
os.environ.setdefault("DO_NOT_TRACK", "1")

import nannyml as nml  # noqa: E402 (after the environment above)
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from evidently import Report  # noqa: E402
from evidently.presets import DataDriftPreset  # noqa: E402

CHUNK = 250


def evidently_drift(before: pd.DataFrame, after: pd.DataFrame) -> dict[str, object]:
    snapshot = Report([DataDriftPreset()]).run(after, before).dict()
    drifted, share = [], 0.0
    for metric in snapshot["metrics"]:
        name = metric["metric_name"]
        if name.startswith("DriftedColumnsCount"):
            share = float(metric["value"]["share"])
        elif name.startswith("ValueDrift("):
            column = metric["config"]["column"]
            threshold = float(metric["config"]["threshold"])
            method = metric["config"]["method"]
            value = float(metric["value"])
            # p-value methods drift below the threshold, distances above it
            if ("p_value" in method and value < threshold) or (
                    "p_value" not in method and value >= threshold):
                drifted.append(column)
    return {"drifted": drifted, "dataset_drift": share >= 0.5}


def nannyml_drift(before: pd.DataFrame, after: pd.DataFrame) -> dict[str, object]:
    columns = list(before.columns)
    calc = nml.UnivariateDriftCalculator(column_names=columns,
                                         continuous_methods=["kolmogorov_smirnov"],
                                         categorical_methods=["chi2"], chunk_size=CHUNK)
    calc.fit(before)
    result = calc.calculate(after).filter(period="analysis").to_df()
    drifted = [c for c in columns
               if float(result[(c, "kolmogorov_smirnov", "alert")].astype(float).mean()) >= 0.5]
    return {"drifted": drifted}


def main() -> None:
    cases_path, out_path = sys.argv[1], sys.argv[2]
    data = np.load(cases_path, allow_pickle=False)
    n = int(data["n"])
    out = []
    warnings.simplefilter("ignore")
    for i in range(n):
        features = [str(f) for f in data[f"features_{i}"]]
        before = pd.DataFrame(data[f"before_{i}"], columns=features)
        after = pd.DataFrame(data[f"after_{i}"], columns=features)
        out.append({"evidently": evidently_drift(before, after),
                    "nannyml": nannyml_drift(before, after)})
        print(f"peers: case {i + 1}/{n}", file=sys.stderr, flush=True)
    with open(out_path, "w", encoding="utf-8") as fh:
        json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
