"""Make the README's pictures with the project's own code: an importance-over-time plot (iPFI of
an online MLP on the drifting Agrawal stream) and a screenshot of the TensorBoard custom-scalars
dashboard of the same run, taken in headless Chromium.

    python scripts/make_readme_images.py [--out docs/images] [--rows 10000]

The default is the quick start's stream: 10,000 rows, the drift at row 5,000.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import torch

from torchstream import OnlineClassifier, Prequential
from torchstream.explain import IncrementalPFI, IncrementalSAGE
from torchstream.models import MLP
from torchstream.sinks import History, TensorBoardSink
from torchstream.viz import plot_importance
from torchstream.sinks.tensorboard_view import browser_available, dashboard_text, serve_tensorboard
from torchstream.streams import agrawal_drift


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/images")
    parser.add_argument("--rows", type=int, default=10_000)
    args = parser.parse_args()
    torch.set_num_threads(1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stream = agrawal_drift(n_samples=args.rows, position=args.rows // 2)
    columns = list(stream.schema.columns)
    learner = OnlineClassifier(lambda d, k: MLP(d, k, hidden=(64,)), lr=5e-3, scale_inputs=True,
                            seed=0)
    plugins = [IncrementalPFI(None, "cross_entropy", len(columns), feature_names=columns,
                              alpha=0.002, seed=0),
               IncrementalSAGE(None, "cross_entropy", len(columns), feature_names=columns,
                               alpha=0.002, empty_prediction="imputed", seed=0)]
    history = History()
    with tempfile.TemporaryDirectory() as tmp:
        runner = Prequential(learner, stream, batch_size=4, plugins=plugins,
                             sinks=[history, TensorBoardSink(f"{tmp}/agrawal-drift-mlp", run="mlp",
                                                             explainers=["ipfi", "isage"])],
                             log_every=10)
        runner.run()
        runner.close()
        plot_importance(history, "ipfi", drift_positions=stream.drift_positions,  # steps: rows
                        path=out / "ipfi_over_time.png")
        print(f"wrote {out / 'ipfi_over_time.png'}")
        if not browser_available():
            print("no Chromium / chromedriver / selenium: skipping the TensorBoard screenshot")
            return
        with serve_tensorboard(tmp) as url:
            dashboard_text(url, dashboard="custom_scalars", wait_for=["ipfi", "isage"],
                           screenshot=out / "tensorboard_custom_scalars.png",
                           size=(1400, 2100))
        print(f"wrote {out / 'tensorboard_custom_scalars.png'}")


if __name__ == "__main__":
    main()
