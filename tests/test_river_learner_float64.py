"""River models see the stream's values exactly (float64 rows) and are evaluated as river's own
``progressive_val_score`` evaluates them."""

from __future__ import annotations

import csv
import itertools

import pytest
import torch
from river import datasets, evaluate, metrics, tree

from torchstream.evaluate import Prequential
from torchstream.learners import RiverLearner
from torchstream.streams import from_river
from torchstream.streams.csv_reader import read_csv


def test_river_learner_rows_are_float64_by_default():
    stream = from_river(datasets.Phishing())
    learner = RiverLearner.for_stream(tree.HoeffdingTreeClassifier(), stream)
    assert learner.dtype == torch.float64
    assert RiverLearner(tree.HoeffdingTreeClassifier(), stream.schema,
                        dtype=torch.float32).dtype == torch.float32


def test_predictions_equal_a_native_river_loop_row_by_row():
    """Test-then-train at B = 1 through the runner's tensors gives, on every row, the class a
    plain river loop predicts on the dataset's own dict rows."""
    stream = from_river(datasets.Phishing())
    learner = RiverLearner.for_stream(tree.HoeffdingTreeClassifier(), stream)
    native = tree.HoeffdingTreeClassifier()
    mismatches = 0
    for i, ((X, y), (x, label)) in enumerate(zip(stream.batches(1, dtype=learner.dtype),
                                                 datasets.Phishing())):
        ours = stream.classes[int(learner(X).argmax(1))]
        theirs = native.predict_one(x)
        if i > 0:  # the empty model: river predicts nothing, see the next test
            mismatches += ours != theirs
        learner.learn(X, y)
        native.learn_one(x, label)
    assert mismatches == 0


def test_prequential_accuracy_equals_river_progressive_val_score():
    """The same correct predictions; the runner counts the first row (the empty model's
    prediction, class 0 from uniform probabilities, wrong here) where river skips it, so
    ``accuracy * n == river_accuracy * (n - 1)``."""
    stream = from_river(datasets.Phishing())
    learner = RiverLearner.for_stream(tree.HoeffdingTreeClassifier(), stream)
    ours = Prequential(learner, stream, batch_size=1, record_steps=False).run()
    river_acc = metrics.Accuracy()
    evaluate.progressive_val_score(datasets.Phishing(), tree.HoeffdingTreeClassifier(),
                                   river_acc)
    n = ours.n_rows
    assert river_acc.cm.n_samples == n - 1
    assert ours.metrics["accuracy"] * n == pytest.approx(river_acc.get() * (n - 1), abs=1e-9)


def test_a_hoeffding_tree_on_electricity_predicts_every_row_as_native_river(data_dir):
    """On the first 20,000 rows of electricity a float32 batch changed 12 predictions (the
    rounded values move split decisions); float64 rows change none."""
    path = data_dir / "electricity.csv"
    if not path.exists():
        pytest.skip(f"{path} is not available")
    stream = read_csv(path, "class")
    learner = RiverLearner.for_stream(tree.HoeffdingTreeClassifier(), stream)
    native = tree.HoeffdingTreeClassifier()
    with path.open() as f:
        rows = list(itertools.islice(csv.DictReader(f), 20_000))
    mismatches = 0
    for i, ((X, y), row) in enumerate(zip(stream.batches(1, dtype=learner.dtype, stop=20_000),
                                          rows)):
        label = int(row.pop("class"))
        x = {k: float(v) for k, v in row.items()}
        if i > 0:
            mismatches += stream.classes[int(learner(X).argmax(1))] != native.predict_one(x)
        learner.learn(X, y)
        native.learn_one(x, label)
    assert mismatches == 0
