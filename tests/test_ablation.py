"""The ablation test (spec §3.5, §7 check 20): F1 against hand-computed values and scikit-learn,
a model that uses one feature, the random reference, and bad input."""

from __future__ import annotations

import pytest
import torch
from sklearn.metrics import f1_score as sk_f1

from torchstream.explain.ablation import ablation_test, compare_attributions, f1_score
from torchstream.explain.baselines import ExpectationBaseline
from torchstream.explain.local import LocalAttributor

F64 = torch.float64


def one_feature_model(z: torch.Tensor) -> torch.Tensor:
    p = torch.sigmoid(20.0 * (z[:, 0] - 0.7))
    return torch.stack([1 - p, p], 1)


def test_f1_matches_scikit_learn():
    g = torch.Generator().manual_seed(0)
    for k in (2, 4):
        y = torch.randint(0, k, (200,), generator=g)
        pred = torch.where(
            torch.rand(200, generator=g) < 0.7, y, torch.randint(0, k, (200,), generator=g)
        )
        ref = sk_f1(y.numpy(), pred.numpy(), average="binary" if k == 2 else "macro")
        assert f1_score(y, pred, k) == pytest.approx(ref, abs=1e-12)


def test_masks_each_rows_top_features_by_absolute_attribution():
    # the model predicts class 1 iff x0 + x1 + x2 > 1.5; each row's ranking differs
    def model(z):
        return (z.sum(1) > 1.5).double()

    X = torch.ones(3, 3, dtype=F64)
    y = torch.ones(3, dtype=torch.long)
    attr = torch.tensor([[3.0, -2.0, 1.0], [0.1, 0.2, -5.0], [1.0, 1.0, 0.0]])
    # K = 1 masks one feature per row (sum 2 > 1.5: still 1); K = 2 masks two (sum 1: 0)
    res = ablation_test(model, X, y, attr, fractions=[0, 1 / 3, 2 / 3], mask="zero", n_random=2)
    assert res.n_masked.tolist() == [0, 1, 2]
    assert res.scores.tolist() == [1.0, 1.0, 0.0]
    # mask values per row and column: K = 1 replaces exactly the top feature of each row
    values = torch.tensor([[-9.0, 0, 0], [0, 0, -9.0], [-9.0, 0, 0]], dtype=F64)
    res = ablation_test(model, X, y, attr, fractions=[1 / 3], mask=values)
    assert res.scores.tolist() == [0.0]  # each row's top feature got -9


def test_one_feature_model_top_k_beats_random():
    # check 20: the output depends only on feature 0 (m = 10)
    g = torch.Generator().manual_seed(1)
    X = torch.rand(300, 10, generator=g, dtype=F64)
    y = (X[:, 0] > 0.7).long()
    base = ExpectationBaseline(50, seed=0)
    base.update(X)
    exp = LocalAttributor(
        one_feature_model,
        "shapley_value_sampling",
        base,
        n_samples=5,
        target=1,
        method_kwargs={"n_samples": 4},
    )
    res = compare_attributions(
        one_feature_model, X, y, {"svs": exp}, mask="mean", fractions=[0.0, 0.1], n_random=20
    )["svs"]
    f1 = res.scores.tolist()
    assert f1[0] == 1.0 and f1[1] <= 0.5  # masking the top feature kills F1 (mean 0.5 < 0.7)
    # random K = 1/m masks feature 0 in 10 % of the rows; those positives become negatives:
    # recall 0.9, precision 1 -> F1 = 0.947, a drop of about 1/(2m); allow 3 sd of the
    # binomial share (sd = sqrt(0.1 * 0.9 / ~90 positives) = 0.03)
    drop = 1.0 - res.random_scores[1].item()
    assert 0.0 < drop < 1 / 10 + 0.05
    assert res.area < res.random_area


def test_bad_input():
    X = torch.rand(10, 3, dtype=F64)
    y = torch.zeros(10, dtype=torch.long)
    with pytest.raises(ValueError, match="shape of X"):
        ablation_test(one_feature_model, X, y, torch.zeros(10, 2))
    with pytest.raises(ValueError, match="labels"):
        ablation_test(one_feature_model, X, y[:5], torch.zeros(10, 3))
    with pytest.raises(ValueError, match="fractions"):
        ablation_test(one_feature_model, X, y, torch.zeros(10, 3), fractions=[1.5])
    with pytest.raises(ValueError, match="mask"):
        ablation_test(one_feature_model, X, y, torch.zeros(10, 3), mask="median")
    with pytest.raises(ValueError, match="no row correctly"):
        ablation_test(one_feature_model, X, 1 - (X[:, 0] > 0.7).long(), torch.zeros(10, 3))
    with pytest.raises(ValueError, match="non-finite"):
        ablation_test(lambda z: z[:, 0] / 0.0 * 0.0, X, y, torch.zeros(10, 3))
