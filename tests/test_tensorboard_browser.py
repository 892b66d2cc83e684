"""TensorBoard as a user sees it: a short run's logs served by ``tensorboard --logdir`` and
opened in headless Chromium; the explainer charts must be there by their titles.

Needs Chromium, chromedriver and selenium (CI installs them; see ``.ci/run``). Without them the
test is skipped with the reason.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from torchstream import OnlineLearner, Prequential
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
    learner = OnlineLearner(lambda d, k: MLP(d, k, hidden=(16,)), lr=0.01, scale_inputs=True,
                            seed=0)
    plugins = [
        IncrementalPFI(None, "cross_entropy", len(columns), feature_names=columns, alpha=0.02,
                       seed=0),
        IncrementalSAGE(None, "cross_entropy", len(columns), feature_names=columns, alpha=0.02,
                        seed=0),
    ]
    runner = Prequential(learner, stream, batch_size=8, plugins=plugins,
                         sinks=[TensorBoardSink(str(logdir / "demo"))], log_every=5)
    runner.run()
    runner.close()
    return columns


def test_explainer_charts_in_the_browser(tmp_path):
    torch.set_num_threads(1)
    columns = write_run(tmp_path / "logs")
    with serve_tensorboard(tmp_path / "logs") as url:
        # custom scalars: one chart per explainer holding one series per feature
        # (a tall window, so that every chart is rendered, not only those in view)
        text = dashboard_text(url, dashboard="custom_scalars",
                              wait_for=["metrics", "ipfi", "isage", f"Matches ({len(columns)})"],
                              screenshot=tmp_path / "custom_scalars.png", size=(1400, 2200))
        lines = text.splitlines()
        assert "ipfi" in lines and "isage" in lines and "accuracy" in lines
        assert lines.count(f"Matches ({len(columns)})") == 2  # one series per feature, twice
        # time series: a group per explainer with one card per feature
        d = len(columns)
        dashboard_text(url, dashboard="timeseries",
                       wait_for=[f"ipfi{d} cards", f"isage{d} cards"],
                       screenshot=tmp_path / "timeseries.png")
    assert (tmp_path / "custom_scalars.png").stat().st_size > 10_000
    assert (tmp_path / "timeseries.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
