"""Tests of the torch models and the TOML model specs."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from torch.nn import functional as F

from torchstream.models import (
    MLP,
    Autoencoder,
    ModelSpec,
    Probit,
    SoftDecisionTree,
    available_specs,
    load_spec,
)
from torchstream.models import specs as specs_module

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO_MODELS = Path(__file__).resolve().parents[1] / "models"
D = 5


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """The tensors here are tiny: intra-op threads only add overhead (a lot on a busy CPU)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


FACTORIES = {
    "mlp": lambda: MLP(D, 3, hidden=(8, 4), activation="gelu", dropout=0.1),
    "mlp_linear": lambda: MLP(D, 2, hidden=()),
    "probit": lambda: Probit(D, 2),
    "soft_tree": lambda: SoftDecisionTree(D, 3, depth=3),
    "soft_tree_regression": lambda: SoftDecisionTree(D, 2, depth=2, task="regression"),
    "autoencoder": lambda: Autoencoder(D, latent=2, hidden=(4,)),
}
OUT_WIDTH = {
    "mlp": 3,
    "mlp_linear": 2,
    "probit": 2,
    "soft_tree": 3,
    "soft_tree_regression": 2,
    "autoencoder": D,
}


@pytest.mark.parametrize("name", sorted(FACTORIES))
@pytest.mark.parametrize("batch", [1, 7])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_output_shapes_and_dtypes(name: str, batch: int, dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    model = FACTORIES[name]().to(dtype)
    out = model(torch.randn(batch, D, dtype=dtype))
    assert out.shape == (batch, OUT_WIDTH[name])
    assert out.dtype == dtype
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_auxiliary_shapes(dtype: torch.dtype) -> None:
    x = torch.randn(7, D, dtype=dtype)
    tree = SoftDecisionTree(D, 3, depth=3).to(dtype)
    assert tree.path_probabilities(x).shape == (7, 8)
    assert tree.gate_probabilities(x).shape == (7, 7)
    assert Probit(D).to(dtype).proba(x).shape == (7, 1)
    ae = Autoencoder(D, latent=3, hidden=(4, 4)).to(dtype)
    assert ae.encode(x).shape == (7, 3)
    assert ae.decode(torch.zeros(7, 3, dtype=dtype)).shape == (7, D)
    assert ae.reconstruction_error(x).shape == (7,)


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_seeded_construction_is_deterministic(name: str) -> None:
    torch.manual_seed(3)
    a = FACTORIES[name]().eval()
    torch.manual_seed(3)
    b = FACTORIES[name]().eval()
    x = torch.randn(4, D)
    assert torch.equal(a(x), b(x))


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_wrong_width_raises_with_expected_width(name: str) -> None:
    model = FACTORIES[name]()
    with pytest.raises(ValueError, match=rf"width {D}\b.*got width 3"):
        model(torch.zeros(2, 3))
    with pytest.raises(ValueError, match="2-D"):
        model(torch.zeros(D))


def test_autoencoder_decode_checks_latent_width() -> None:
    with pytest.raises(ValueError, match="width 2.*got width 3"):
        Autoencoder(D, latent=2).decode(torch.zeros(1, 3))


@pytest.mark.parametrize(
    ("build", "argument"),
    [
        (lambda: MLP(0, 2), "n_features"),
        (lambda: MLP(3, 0), "n_outputs"),
        (lambda: MLP(3, 2, hidden=(4, 0)), "hidden"),
        (lambda: MLP(3, 2, activation="swish"), "activation"),
        (lambda: MLP(3, 2, hidden=(), activation="swish"), "activation"),
        (lambda: MLP(3, 2, dropout=1.0), "dropout"),
        (lambda: Probit(0), "n_features"),
        (lambda: Probit(3, 0), "n_outputs"),
        (lambda: SoftDecisionTree(0, 2), "n_features"),
        (lambda: SoftDecisionTree(3, 0), "n_outputs"),
        (lambda: SoftDecisionTree(3, 2, depth=0), "depth"),
        (lambda: SoftDecisionTree(3, 2, inverse_temperature=0.0), "inverse_temperature"),
        (lambda: SoftDecisionTree(3, 2, task="ranking"), "task"),
        (lambda: Autoencoder(0), "n_features"),
        (lambda: Autoencoder(3, latent=0), "latent"),
        (lambda: Autoencoder(3, activation="swish"), "activation"),
    ],
)
def test_bad_arguments_raise_naming_the_argument(build, argument: str) -> None:
    with pytest.raises(ValueError, match=argument):
        build()


@pytest.mark.parametrize("make", [lambda: MLP(D, 2, hidden=(6,)), lambda: Probit(D, 2)])
def test_output_layer_can_be_replaced_and_n_outputs_follows(make) -> None:
    model = make()
    layer = model.output_layer
    assert isinstance(layer, torch.nn.Linear) and model.n_outputs == 2
    model.output_layer = torch.nn.Linear(layer.in_features, 4)
    model.n_outputs = 4  # allowed: matches the layer
    assert model.n_outputs == 4
    assert model(torch.zeros(3, D)).shape == (3, 4)
    with pytest.raises(ValueError, match="out_features=4"):
        model.n_outputs = 5


def test_probit_declares_its_link() -> None:
    assert Probit(D).link == "probit"


# --- soft decision tree ------------------------------------------------------------------


def test_soft_tree_depth1_path_probabilities_by_hand() -> None:
    torch.manual_seed(1)
    tree = SoftDecisionTree(D, 2, depth=1, inverse_temperature=2.0).double()
    x = torch.randn(6, D, dtype=torch.float64)
    w, b = tree.gates.weight[0], tree.gates.bias[0]
    p = torch.sigmoid(2.0 * (x @ w + b))
    expected = torch.stack([1 - p, p], dim=1)
    torch.testing.assert_close(tree.path_probabilities(x), expected)
    torch.testing.assert_close(tree.gate_probabilities(x), p[:, None])


def test_soft_tree_depth2_path_probabilities_by_hand() -> None:
    torch.manual_seed(2)
    tree = SoftDecisionTree(D, 2, depth=2, inverse_temperature=0.7).double()
    x = torch.randn(6, D, dtype=torch.float64)
    p = [torch.sigmoid(0.7 * (x @ tree.gates.weight[i] + tree.gates.bias[i])) for i in range(3)]
    # root 0; its left child is node 1, its right child node 2; leaves left to right
    expected = torch.stack(
        [
            (1 - p[0]) * (1 - p[1]),
            (1 - p[0]) * p[1],
            p[0] * (1 - p[2]),
            p[0] * p[2],
        ],
        dim=1,
    )
    torch.testing.assert_close(tree.path_probabilities(x), expected)


def test_soft_tree_path_probabilities_sum_to_one() -> None:
    torch.manual_seed(4)
    tree = SoftDecisionTree(D, 3, depth=5, inverse_temperature=3.0)
    probs = tree.path_probabilities(10 * torch.randn(9, D))
    assert probs.shape == (9, 32)
    assert (probs >= 0).all()
    torch.testing.assert_close(probs.sum(1), torch.ones(9))


def test_soft_tree_classification_output_is_log_mixture() -> None:
    torch.manual_seed(5)
    tree = SoftDecisionTree(D, 3, depth=2).double()
    x = torch.randn(4, D, dtype=torch.float64)
    P = tree.path_probabilities(x)
    mixture = sum(P[:, l : l + 1] * torch.softmax(tree.leaves[l], 0) for l in range(4))
    out = tree(x)
    torch.testing.assert_close(out.exp(), mixture)
    torch.testing.assert_close(out.exp().sum(1), torch.ones(4, dtype=torch.float64))
    # cross_entropy on log-probabilities is the negative log-likelihood of the mixture
    y = torch.tensor([0, 2, 1, 1])
    torch.testing.assert_close(F.cross_entropy(out, y), -mixture[range(4), y].log().mean())


def test_soft_tree_binary_output_is_logit_of_mixture() -> None:
    torch.manual_seed(9)
    tree = SoftDecisionTree(D, 1, depth=3).double()
    x = torch.randn(5, D, dtype=torch.float64)
    p = tree.path_probabilities(x) @ torch.sigmoid(tree.leaves)
    out = tree(x)
    assert out.shape == (5, 1)
    torch.testing.assert_close(torch.sigmoid(out), p)
    torch.testing.assert_close(tree.leaf_distributions(), torch.sigmoid(tree.leaves))


def test_soft_tree_regression_output_is_hand_mixture() -> None:
    torch.manual_seed(6)
    tree = SoftDecisionTree(D, 2, depth=3, task="regression").double()
    x = torch.randn(5, D, dtype=torch.float64)
    P = tree.path_probabilities(x)
    expected = torch.zeros(5, 2, dtype=torch.float64)
    for i in range(5):
        for leaf in range(8):
            expected[i] += P[i, leaf] * tree.leaves[leaf]
    torch.testing.assert_close(tree(x), expected)


# --- probit and autoencoder -----------------------------------------------------------------


def test_probit_proba_is_normal_cdf_of_score() -> None:
    import scipy.stats  # imported here: slow to import, needed only by this test

    torch.manual_seed(7)
    model = Probit(D, 2).double()
    x = 2 * torch.randn(8, D, dtype=torch.float64)
    score = model(x)
    torch.testing.assert_close(score, x @ model.output_layer.weight.T + model.output_layer.bias)
    expected = torch.from_numpy(scipy.stats.norm.cdf(score.detach().numpy()))
    torch.testing.assert_close(model.proba(x).detach(), expected)


def test_autoencoder_reconstruction_error() -> None:
    torch.manual_seed(8)
    ae = Autoencoder(D, latent=2, hidden=(4,))
    x = torch.randn(6, D)
    torch.testing.assert_close(ae.reconstruction_error(x), ((x - ae(x)) ** 2).mean(1))


# --- training -------------------------------------------------------------------------------


def _separable(n: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, D, generator=g)
    y = (x[:, 0] + x[:, 1] > 0).long()
    return x, y


@pytest.mark.parametrize(
    "make", [lambda: MLP(D, 2, hidden=(16,)), lambda: SoftDecisionTree(D, 2, depth=3)]
)
def test_adam_reduces_loss_on_separable_problem(make) -> None:
    torch.manual_seed(0)
    model = make()
    x, y = _separable()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    with torch.no_grad():
        before = F.cross_entropy(model(x), y).item()
    for _ in range(30):
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
    with torch.no_grad():
        after = F.cross_entropy(model(x), y).item()
    assert after < 0.7 * before


# --- specs ----------------------------------------------------------------------------------

NAMES = ("mlp", "probit", "soft_tree", "autoencoder")


def test_shipped_spec_files_exist_and_match_builtins() -> None:
    assert sorted(p.stem for p in REPO_MODELS.glob("*.toml")) == sorted(NAMES)
    assert sorted(specs_module.BUILTIN_SPECS) == sorted(NAMES)
    for name in NAMES:
        with (REPO_MODELS / f"{name}.toml").open("rb") as fh:
            assert tomllib.load(fh) == specs_module.BUILTIN_SPECS[name], name
        from_file = load_spec(REPO_MODELS / f"{name}.toml")
        builtin = ModelSpec.from_dict(specs_module.BUILTIN_SPECS[name], name=name)
        assert (from_file.name, from_file.type, from_file.model, from_file.learner) == (
            builtin.name,
            builtin.type,
            builtin.model,
            builtin.learner,
        )


@pytest.mark.parametrize("name", NAMES)
def test_load_spec_builds_model_with_right_output_shape(name: str) -> None:
    spec = load_spec(name)
    assert spec.name == name and spec.type == name
    assert spec.source.endswith(f"{name}.toml")
    assert {"optimizer", "lr", "loss"} <= set(spec.learner)
    model = spec.build(n_features=6, n_outputs=3)
    out = model(torch.randn(7, 6))
    expected = {"mlp": 3, "probit": 3, "soft_tree": 3, "autoencoder": 6}[name]
    assert out.shape == (7, expected)


def test_load_spec_falls_back_to_builtins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(specs_module, "spec_dirs", list)
    spec = load_spec("mlp")
    assert spec.source == "<built-in>"
    assert spec.model == {"hidden": [64], "activation": "relu", "dropout": 0.0}
    assert set(available_specs()) == set(NAMES)


def test_env_var_folder_takes_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "mlp.toml").write_text('[model]\ntype = "mlp"\nhidden = [3]\n')
    (tmp_path / "tiny.toml").write_text('[model]\ntype = "probit"\n')
    monkeypatch.setenv("TORCHSTREAM_MODELS", str(tmp_path))
    assert load_spec("mlp").model == {"hidden": [3]}
    assert load_spec("tiny").type == "probit"
    assert "tiny" in available_specs()
    assert load_spec("soft_tree").type == "soft_tree"  # not in the folder: next place


def test_build_passes_task_to_soft_tree() -> None:
    tree = load_spec("soft_tree").build(4, 2, task="regression")
    assert isinstance(tree, SoftDecisionTree) and tree.task == "regression"
    assert isinstance(load_spec("mlp").build(4, 2, task="regression"), MLP)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "custom.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('[model]\ntype = "mlp"\nhiddn = [4]\n', "hiddn"),
        ('[model]\ntype = "probit"\ndepth = 3\n', "depth"),
        ('[model]\ntype = "mlp"\nn_features = 3\n', "n_features"),
        ('[model]\ntype = "mlp"\n[learner]\nlearning_rate = 0.1\n', "learning_rate"),
        ('[model]\ntype = "mlp"\n[trainer]\nepochs = 1\n', "trainer"),
        ('[model]\ntype = "forest"\n', "forest"),
        ('[model]\ntype = "mlp"\n[learner]\noptimizer = "lbfgs"\n', "lbfgs"),
        ('[model]\ntype = "mlp"\n[learner]\nlr = -1.0\n', "lr"),
        ("[learner]\nlr = 0.1\n", r"\[model\]"),
    ],
)
def test_invalid_spec_raises_naming_key_and_file(tmp_path: Path, text: str, key: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(ValueError, match=key) as info:
        load_spec(path)
    assert str(path) in str(info.value)


def test_invalid_value_reported_at_build(tmp_path: Path) -> None:
    spec = load_spec(_write(tmp_path, '[model]\ntype = "mlp"\nactivation = "swish"\n'))
    with pytest.raises(ValueError, match="custom.*activation"):
        spec.build(3, 2)


def test_unknown_spec_name_lists_available() -> None:
    with pytest.raises(FileNotFoundError, match="mlp.*probit|available specs:.*mlp"):
        load_spec("no_such_model")
    with pytest.raises(FileNotFoundError, match="available specs"):
        load_spec(Path("does/not/exist.toml"))
