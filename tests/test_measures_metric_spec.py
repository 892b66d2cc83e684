"""MetricSpec keyword routing (C18), metric directions, complexity counting (C19), registry."""

from __future__ import annotations

import math
import warnings

import pytest
import river.metrics
import torch
from sklearn.exceptions import UndefinedMetricWarning
from sklearn.metrics import f1_score, fbeta_score, log_loss, zero_one_loss

from torchstream.evaluate.measures import (
    MEASURES,
    MetricSpec,
    count_parameters,
    higher_is_better,
    measure,
    tree_complexity,
)
from torchstream.evaluate.metrics import F1, MSE

Y_TRUE = [0, 0, 0, 1]
NO_POSITIVES = [0, 0, 0, 0]


def test_f1_kwargs_reach_the_function_c18() -> None:
    # a batch with no positives at all (true or predicted): F1 is 0 / 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f1 = MetricSpec(f1_score, zero_division=0, average="binary")
        assert f1(NO_POSITIVES, NO_POSITIVES) == 0.0
        assert MetricSpec(f1_score, zero_division=1)(NO_POSITIVES, NO_POSITIVES) == 1.0
        # macro: class 0 has F1 = 2*3 / (3 + 4) = 6/7, class 1 has 0 -> 3/7
        macro = MetricSpec(f1_score, zero_division=0, average="macro")
        assert macro(Y_TRUE, NO_POSITIVES) == pytest.approx(3 / 7)
    # without zero_division, scikit-learn warns on the same batch: the kwarg is what silences it
    with pytest.warns(UndefinedMetricWarning):
        MetricSpec(f1_score)(NO_POSITIVES, NO_POSITIVES)


def test_bad_kwargs_raise_at_construction_c18() -> None:
    with pytest.raises(TypeError, match="beta"):
        MetricSpec(fbeta_score)
    with pytest.raises(TypeError, match="zero_divison"):
        MetricSpec(f1_score, zero_divison=0)
    with pytest.raises(TypeError, match="beta"):
        MetricSpec(river.metrics.FBeta)
    with pytest.raises(TypeError, match="unknown"):
        MetricSpec(river.metrics.F1, average="macro")
    assert MetricSpec(fbeta_score, beta=2.0, zero_division=0)(
        Y_TRUE, [0, 0, 1, 1]
    ) == pytest.approx(5 * 0.5 * 1 / (4 * 0.5 + 1))


def test_river_metric_is_per_batch() -> None:
    spec = MetricSpec(river.metrics.F1)
    first = spec([1, 1, 0], [1, 1, 0])
    second = spec([1, 0, 0, 1], [0, 0, 1, 1])
    assert first == 1.0
    assert second == pytest.approx(f1_score([1, 0, 0, 1], [0, 0, 1, 1]))  # not cumulative
    beta = MetricSpec(river.metrics.FBeta(beta=1.0), beta=2.0)
    assert beta.kwargs == {"beta": 2.0}
    assert beta([1, 0, 0, 1], [0, 0, 1, 1]) == pytest.approx(0.5)
    assert beta.higher_is_better is True


def test_probabilities_become_labels() -> None:
    p = torch.tensor([[0.2, 0.8], [0.6, 0.4], [0.9, 0.1], [0.3, 0.7]])
    assert MetricSpec(zero_one_loss)(torch.tensor([1, 0, 1, 1]), p) == 0.25
    ll = MetricSpec(log_loss, labels=False)
    assert ll([1, 0], [[0.2, 0.8], [0.6, 0.4]]) == pytest.approx(
        -(math.log(0.8) + math.log(0.6)) / 2
    )
    with pytest.raises(ValueError, match="rows"):
        MetricSpec(zero_one_loss)([0, 1], [0])


def test_directions() -> None:
    assert higher_is_better(f1_score) and not higher_is_better(zero_one_loss)
    assert higher_is_better(river.metrics.Accuracy) and not higher_is_better(
        river.metrics.LogLoss()
    )
    assert higher_is_better(F1()) and not higher_is_better(MSE)
    assert higher_is_better("zero_one") is False
    assert higher_is_better("my_score", explicit=True) is True
    with pytest.raises(ValueError, match="higher_is_better"):
        higher_is_better("my_score")
    with pytest.raises(ValueError, match="higher_is_better"):
        MetricSpec(lambda t, p: 0.0)
    assert MetricSpec(lambda t, p: 0.0, higher_is_better=False).higher_is_better is False


# -- complexity (C19) --------------------------------------------------------------------------


def test_tree_complexity_c19() -> None:
    assert tree_complexity(3, 4) == {"splits": 3, "params": 7}
    for m in (1, 7, 50):
        assert tree_complexity(3, 4, leaf_model="linear", n_features=m) == {
            "splits": 7,
            "params": 3 + 4 * m,
        }
    # c = 3 classes: c more splits and m * c parameters per model leaf
    assert tree_complexity(3, 4, leaf_model="naive_bayes", n_features=5, n_classes=3) == {
        "splits": 3 + 4 * 3,
        "params": 3 + 4 * 5 * 3,
    }
    assert tree_complexity(3, 4, n_classes=3) == {"splits": 3, "params": 7}
    with pytest.raises(ValueError, match="n_features"):
        tree_complexity(3, 4, leaf_model="linear")
    with pytest.raises(ValueError, match="leaf_model"):
        tree_complexity(3, 4, leaf_model="svm")
    with pytest.raises(ValueError, match="n_inner"):
        tree_complexity(-1, 4)


def test_count_parameters() -> None:
    lin = torch.nn.Linear(3, 2)
    assert count_parameters(lin) == 8
    with torch.no_grad():
        lin.weight[0].zero_()
    assert count_parameters(lin, nonzero=True) == 5
    assert count_parameters(torch.tensor([0.0, 1e-3, 2.0]), nonzero=True, atol=1e-2) == 1
    with pytest.raises(TypeError, match="model"):
        count_parameters([1, 2])


# -- registry ------------------------------------------------------------------------------------


def test_registry_by_name() -> None:
    dcr = measure("detected_change_rate", window=50)
    assert dcr([100, 300], [110, 150, 250, 420], n_total=500) == 0.5
    assert dcr.higher_is_better is True
    assert measure("false_discovery_rate").higher_is_better is False
    assert measure("noise_variability", loss=MetricSpec(f1_score)).higher_is_better is True
    assert measure("noise_variability").higher_is_better is False  # default zero-one loss
    assert measure("sliding_window_mean", window=2)([1, 0, 0, 1, 0])[-1] == 0.5
    for name, info in MEASURES.items():
        assert info.fn.__name__ == name


def test_registry_errors() -> None:
    with pytest.raises(ValueError, match="known measures: .*detected_change_rate"):
        measure("detection_rate")
    with pytest.raises(TypeError, match="windw"):
        measure("detected_change_rate", windw=50)
    with pytest.raises(TypeError, match="already"):
        measure("detected_change_rate", window=50)([100], [], window=3, n_total=500)
