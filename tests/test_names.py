"""One meaning per name: the former keywords and attributes are gone (the package is
unreleased: no aliases), and every public constructor that takes a ``seed`` defaults to 0."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest
import torch

import torchstream
from torchstream import drift
from torchstream.drift import CDLEEDS, ERICS
from torchstream.evaluate.strategies import DistributedKFold, get_strategy
from torchstream.explain.ipdp import IncrementalPDP

F64 = torch.float64


# ---------------------------------------------------------------------------- ERICS, CDLEEDS
@pytest.mark.parametrize(
    "cls, keyword",
    [(CDLEEDS, "alpha"), (CDLEEDS, "reset_after_drift"), (ERICS, "clamp_alpha")],
)
def test_the_former_keywords_are_gone(cls, keyword):
    with pytest.raises(TypeError, match=f"unexpected keyword argument '{keyword}'"):
        cls(**{keyword: True})


@pytest.mark.parametrize(
    "obj, former",
    [
        (ERICS(), "alpha"), (ERICS(), "partial_alpha"), (ERICS(), "alpha_trace"),
        (ERICS(), "clamp_alpha"), (CDLEEDS(), "alpha"), (CDLEEDS(), "reset_after_drift"),
        (drift, "corrected_alpha"),
    ],
)
def test_the_former_attribute_names_are_gone(obj, former):
    assert not hasattr(obj, former)


# ---------------------------------------------------------------------------- iPDP
def _model(Z: torch.Tensor) -> torch.Tensor:
    return Z[:, 0] ** 2 + 3 * Z[:, 1]


def _rows() -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    return torch.rand(400, 3, generator=g, dtype=F64) * 2 - 1


def _ipdp_run(ipdp: IncrementalPDP) -> IncrementalPDP:
    X = _rows()
    for start in range(0, len(X), 20):
        ipdp.explain(X[start:start + 20])
    return ipdp


def test_ipdp_feature_by_name_is_the_feature_by_index():
    names = ["a", "b", "c"]
    by_name = _ipdp_run(IncrementalPDP(_model, "b", feature_names=names, grid_size=5, alpha=0.05))
    by_index = _ipdp_run(IncrementalPDP(_model, 1, grid_size=5, alpha=0.05))
    assert by_name.feature == 1
    torch.testing.assert_close(by_name.pd, by_index.pd)
    # the PD of 3 x1 is linear: its values at the smoothed points are 3 * grid + E[x0^2]
    pd, grid = by_name.pd, by_name.grid
    torch.testing.assert_close(pd - 3 * grid, torch.full_like(pd, (pd - 3 * grid).mean()))
    assert by_name.feature_names == names and by_name.feature_name == "b"
    assert by_name.name == "ipdp/b" and by_index.name == "ipdp/x1"
    assert by_name.importance_dict().keys() == {"a", "b", "c"}
    assert by_index.feature_names == ["x0", "x1", "x2"]


def test_ipdp_former_feature_name_keyword_is_gone():
    # the explained feature's label comes from feature_names only; feature_name is an attribute
    with pytest.raises(TypeError, match="unexpected keyword argument 'feature_name'"):
        IncrementalPDP(_model, 1, feature_name="b")  # type: ignore[call-arg]
    assert "feature_name" not in inspect.signature(IncrementalPDP).parameters
    ipdp = _ipdp_run(IncrementalPDP(_model, 1, feature_names=["x0", "b", "x2"], grid_size=5))
    assert ipdp.feature_name == "b" and ipdp.name == "ipdp/b"


def test_ipdp_importance_is_a_plain_tensor_not_a_method():
    ipdp = _ipdp_run(IncrementalPDP(_model, 1, grid_size=5, alpha=0.05))
    importance = ipdp.importance
    assert type(importance) is torch.Tensor and not callable(importance)
    assert importance[1].item() == ipdp.score and importance[[0, 2]].isnan().all()
    assert ipdp.feature_names == ["x0", "x1", "x2"]  # unnamed columns: x<j>, the explained too


@pytest.mark.parametrize(
    "feature, names, message",
    [
        ("b", None, "feature 'b' is a name: pass feature_names="),
        ("d", ["a", "b", "c"], r"feature 'd' is not one of feature_names \['a', 'b', 'c'\]"),
        (3, ["a", "b", "c"], "feature index 3 is out of range for the 3 feature_names"),
        (0, ["a", "a"], r"feature_names must be unique, duplicated: \['a'\]"),
    ],
)
def test_ipdp_checks_the_feature_against_the_names(feature, names, message):
    with pytest.raises(ValueError, match=message):
        IncrementalPDP(_model, feature, feature_names=names)


def test_ipdp_checks_the_width_of_x_against_the_names():
    ipdp = IncrementalPDP(_model, 0, feature_names=["a", "b"])
    with pytest.raises(ValueError, match="X has 3 columns but feature_names names 2"):
        ipdp.explain(_rows()[:10])


# ---------------------------------------------------------------------------- seeds
def _public_objects() -> dict[str, object]:
    out: dict[str, object] = {}
    for info in pkgutil.walk_packages(torchstream.__path__, "torchstream."):
        if any(part.startswith("_") for part in info.name.split(".")):
            continue  # private modules (and __main__)
        module = importlib.import_module(info.name)
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            if inspect.isclass(obj):
                out.setdefault(f"{obj.__module__}.{obj.__qualname__}", obj)
    return out


def test_every_public_constructor_with_a_seed_defaults_to_zero():
    seeded = {}
    for name, cls in _public_objects().items():
        try:
            parameters = inspect.signature(cls.__init__).parameters  # type: ignore[misc]
        except (TypeError, ValueError):
            continue
        if "seed" in parameters:
            seeded[name] = parameters["seed"].default
    assert len(seeded) >= 20  # streams, learners, runner, explainers, storages, heads, ...
    assert {k: v for k, v in seeded.items() if v != 0} == {}


def test_default_seeded_objects_draw_alike():
    a, b = DistributedKFold(k=5), DistributedKFold(k=5)
    X, y = torch.zeros(4, 2), torch.zeros(4)
    plans = [(s.plan(t, X, y, last=False).testers.tolist()) for s in (a, b) for t in range(20)]
    assert plans[:20] == plans[20:]
    pdp = [_ipdp_run(IncrementalPDP(_model, 0, grid="quantile", entrance_prob=0.3))
           for _ in range(2)]
    torch.testing.assert_close(pdp[0].grid, pdp[1].grid)


def test_seed_none_still_draws_a_fresh_seed_and_records_it():
    seeds = {DistributedKFold(k=5, seed=None).seed for _ in range(3)}
    assert len(seeds) == 3  # 64-bit seeds from the operating system
    assert get_strategy("kfold", run_seed=None, k=3).seed not in seeds
    assert get_strategy("kfold", k=3).seed != 0  # no run seed: fresh, as documented
