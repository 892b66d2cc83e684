"""TensorBoard as a user sees it: a short run's logs served by ``tensorboard --logdir`` and
opened in headless Chromium; the explainer charts must be there by their titles, with one
series per feature named after it, reaching the number of rows.

Needs Chromium, chromedriver and selenium (CI installs them; see ``.ci/run``). Without them the
test is skipped with the reason.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from torchstream import OnlineClassifier, Prequential
from torchstream.explain import IncrementalPFI, IncrementalSAGE
from torchstream.models import MLP
from torchstream.sinks import TensorBoardSink
from torchstream.sinks.tensorboard_view import browser_available, dashboard_text, serve_tensorboard
from torchstream.streams import agrawal_drift

pytestmark = pytest.mark.skipif(
    not browser_available() and not os.environ.get("TORCHSTREAM_REQUIRE_BROWSER"),
    reason="Chromium / chromedriver / selenium not installed",
)


def write_run(logdir: Path) -> list[str]:
    stream = agrawal_drift(n_samples=400, position=200)
    columns = list(stream.schema.columns)
    learner = OnlineClassifier(lambda d, k: MLP(d, k, hidden=(16,)), lr=0.01, scale_inputs=True,
                            seed=0)
    plugins = [
        IncrementalPFI(None, "cross_entropy", len(columns), feature_names=columns, alpha=0.02,
                       seed=0),
        IncrementalSAGE(None, "cross_entropy", len(columns), feature_names=columns, alpha=0.02,
                        seed=0),
    ]
    runner = Prequential(learner, stream, batch_size=8, plugins=plugins,
                         sinks=[TensorBoardSink(str(logdir / "demo"), run="mlp")], log_every=5)
    runner.run()
    runner.close()
    return columns


def _last_steps(lines: list[str], runs: list[str]) -> dict[str, str]:
    """``{run: last step}`` read from the time-series data tables: each table row is run,
    smoothed, value, step, relative, so the step is the third line after the run's name (the
    run's line in the runs panel is not followed by a value and a step; only table rows are
    read: a run line followed three lines later by a whole number)."""
    out: dict[str, str] = {}
    for i, line in enumerate(lines[:-3]):
        if line in runs and lines[i + 3].isdigit():
            out[line] = lines[i + 3]
    return out


def test_explainer_charts_in_the_browser(tmp_path):
    torch.set_num_threads(1)
    columns = write_run(tmp_path / "logs")
    d = len(columns)
    with serve_tensorboard(tmp_path / "logs") as url:
        # custom scalars: the explainers' category first, one chart per explainer holding one
        # series (a run named after the feature) per feature and the known drift's marker
        # (a tall window, so that every chart is rendered, not only those in view)
        runs = [f"demo/feature/{c}" for c in columns]
        m = d + 1
        text = dashboard_text(url, dashboard="custom_scalars",
                              wait_for=["importance", "metrics", "ipfi", "isage", f"Matches ({m})"],
                              ready=lambda t: t.count(f"Matches ({m})") == 2,
                              screenshot=tmp_path / "custom_scalars.png", size=(1400, 2200))
        lines = text.splitlines()
        assert "ipfi" in lines and "isage" in lines and "accuracy" in lines
        assert lines.index("importance") < lines.index("metrics")
        assert lines.count(f"Matches ({m})") == 2  # one series per feature and the drift, twice
        assert set(runs) <= set(lines)
        assert "demo/mlp" in lines and "." not in lines
        # time series: one group "importance" with one card per explainer; each card's data
        # table holds every feature's run, at the last step: the number of rows (400)
        text = dashboard_text(url, dashboard="timeseries",
                              wait_for=["importance2 cards", "/isage", "Relative"],
                              ready=lambda t: len(_last_steps(t.splitlines(), runs)) == len(runs),
                              screenshot=tmp_path / "timeseries.png", size=(1400, 2200))
        lines = text.splitlines()
        assert _last_steps(lines, runs) == {run: "400" for run in runs}
    assert (tmp_path / "custom_scalars.png").stat().st_size > 10_000
    assert (tmp_path / "timeseries.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
