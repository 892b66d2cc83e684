"""The paths that claim to run on CUDA do, and give the CPU's results.

Every test here is marked ``cuda`` (``pytest -m cuda`` selects them together with the other
tests whose name says ``cuda``) and is skipped without a CUDA device. Where the computation is
deterministic and float64 (explainers with CPU generators, the Probit head, captum's gradients),
CUDA must equal the CPU up to the reduction order of float64 sums (relative 1e-9); where the
noise is drawn by a generator on the device (Monte Carlo heads), the CUDA run must be
reproducible, resume exactly from a checkpoint and reach the same conclusion as the CPU.
"""

from __future__ import annotations

import json

import pytest
import torch

from torchstream.checkpoint import load_checkpoint, save_checkpoint
from torchstream.cli import main
from torchstream.drift import ERICS
from torchstream.explain import IncrementalPDP, IncrementalPFI, IncrementalSAGE, LocalAttributor
from torchstream.learners import DivergenceError, OnlineClassifier
from torchstream.models import MLP, MLPHead, ProbitHead
from torchstream.select import FIRES

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

F64 = torch.float64
GPU = "cuda"
RTOL = 1e-9  # float64 sums in another order: differences of a few ulps, far below 1e-9


def _mlp64(d: int, k: int, device: str) -> torch.nn.Module:
    torch.manual_seed(0)
    return MLP(d, k, hidden=(32,)).to(device=device, dtype=F64).eval()


def _data(n: int, d: int, k: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g, dtype=F64)
    y = (X[:, 0] + 0.5 * X[:, 1] > 0).long() if k == 2 else torch.randint(k, (n,), generator=g)
    return X, y


def _close(a: torch.Tensor, b: torch.Tensor) -> None:
    torch.testing.assert_close(a.detach().cpu(), b.detach().cpu(), rtol=RTOL, atol=1e-12)


EXPLAINERS = {
    "ipfi": lambda f, d: IncrementalPFI(f, "cross_entropy", d, alpha=0.05, storage_size=50,
                                        seed=3),
    "isage-joint": lambda f, d: IncrementalSAGE(f, "cross_entropy", d, alpha=0.05,
                                                storage_size=50, seed=3),
    "isage-product": lambda f, d: IncrementalSAGE(f, "cross_entropy", d, alpha=0.05,
                                                  imputer="product", storage_size=50, seed=3),
    "isage-observational": lambda f, d: IncrementalSAGE(
        f, "cross_entropy", d, alpha=0.05, removal="observational", storage_size=50, seed=3),
}


@pytest.mark.parametrize("kind", list(EXPLAINERS))
def test_loss_explainers_on_cuda_equal_cpu(kind):
    """Draws come from the explainers' CPU generators, so the CUDA estimate is the CPU's."""
    d, k = 5, 3
    X, y = _data(240, d, k)
    runs = {}
    for key, device in (("cpu", "cpu"), ("gpu", GPU)):
        model = _mlp64(d, k, device)
        exp = EXPLAINERS[kind](lambda Z, m=model: torch.softmax(m(Z), dim=1), d)
        for i in range(0, 240, 16):
            exp.explain(X[i:i + 16].to(device), y[i:i + 16].to(device))
        assert exp.importance.device.type == device
        runs[key] = exp
    _close(runs["gpu"].importance, runs["cpu"].importance)
    assert runs["cpu"].importance.abs().sum() > 0  # not a trivial zero
    # the CUDA state resumes on the CPU with the same estimate
    again = EXPLAINERS[kind](lambda Z: Z, d)
    again.load_state_dict(runs["gpu"].state_dict())
    _close(again.importance, runs["cpu"].importance)


#: compile=True explainers on a probability module (float64 and float32).
COMPILED = {
    "ipfi": lambda f, d, c: IncrementalPFI(f, "cross_entropy", d, alpha=0.05, storage_size=50,
                                           n_samples=2, seed=3, compile=c),
    "isage-joint": lambda f, d, c: IncrementalSAGE(f, "cross_entropy", d, alpha=0.05,
                                                   storage_size=50, n_samples=2, seed=3,
                                                   compile=c),
    "isage-product": lambda f, d, c: IncrementalSAGE(f, "cross_entropy", d, alpha=0.05,
                                                     imputer="product", storage_size=50,
                                                     seed=3, compile=c),
}


@pytest.mark.parametrize("dtype", [F64, torch.float32])
@pytest.mark.parametrize("kind", list(COMPILED))
def test_compiled_explainers_on_cuda_equal_eager(kind, dtype):
    """compile=True on CUDA (triton kernels) gives the eager CUDA estimate: the same draws, the
    sums in another order (float64 1e-9 relative, float32 1e-5), and stays on the device."""
    d, k = 5, 3
    X, y = _data(240, d, k)
    X = X.to(dtype)
    runs = {}
    for c in (False, True):
        torch.manual_seed(0)
        model = torch.nn.Sequential(_mlp64(d, k, GPU), torch.nn.Softmax(dim=1)).to(dtype)
        exp = COMPILED[kind](model, d, c)
        for i in range(0, 240, 16):
            exp.explain(X[i:i + 16].to(GPU), y[i:i + 16].to(GPU))
        runs[c] = exp
    compiled = runs[True]
    assert compiled.compile_off_reason is None and compiled.compile_seconds > 0
    assert compiled.importance.device.type == GPU
    rtol = RTOL if dtype == F64 else 1e-5
    torch.testing.assert_close(compiled.importance.cpu(), runs[False].importance.cpu(),
                               rtol=rtol, atol=rtol * 1e-3)
    assert runs[False].importance.abs().sum() > 0


@pytest.mark.parametrize("dtype", [F64, torch.float32])
def test_compiled_ipdp_on_cuda_equals_eager(dtype):
    d, k = 4, 2
    X, _ = _data(300, d, k)
    X = X.to(dtype)
    out = {}
    for c in (False, True):
        model = torch.nn.Sequential(_mlp64(d, k, GPU), torch.nn.Softmax(dim=1)).to(dtype)
        pdp = IncrementalPDP(model, 1, alpha=0.05, grid_size=7, n_ice=5, seed=2, compile=c)
        for i in range(0, 300, 20):
            pdp.explain(X[i:i + 20].to(GPU))
        out[c] = pdp
    assert out[True].compile_off_reason is None and out[True].compile_seconds > 0
    rtol = RTOL if dtype == F64 else 1e-5
    for name in ("pd", "grid"):
        torch.testing.assert_close(getattr(out[True], name).cpu(), getattr(out[False], name).cpu(),
                                   rtol=rtol, atol=rtol * 1e-3)


def test_compiled_learner_on_cuda_equals_eager():
    """OnlineClassifier(compile=True) on CUDA: the eager learner's predictions and weights after
    40 steps, within float32 rounding of fused kernels summed in another order."""
    X, y = _data(320, 6, 3)
    X = X.float()
    runs = {}
    for c in (False, True):
        learner = OnlineClassifier(lambda n, k: MLP(n, k, hidden=(16,)), lr=0.01, seed=0,
                                device=GPU, classes=[0, 1, 2], compile=c)
        for i in range(0, 320, 8):
            learner.learn(X[i:i + 8].to(GPU), y[i:i + 8].to(GPU))
        with torch.no_grad():
            runs[c] = (learner(X[:64].to(GPU)).cpu(), learner)
    assert runs[True][1].compile_off_reason is None and runs[True][1].compile_seconds > 0
    torch.testing.assert_close(runs[True][0], runs[False][0], rtol=1e-4, atol=1e-5)
    for p, q in zip(runs[True][1].module.parameters(), runs[False][1].module.parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach().cpu(), rtol=1e-4, atol=1e-5)


def test_ipdp_on_cuda_equals_cpu_for_a_model():
    d, k = 4, 2
    X, _ = _data(300, d, k)
    out = {}
    for key, device in (("cpu", "cpu"), ("gpu", GPU)):
        model = _mlp64(d, k, device)
        pdp = IncrementalPDP(lambda Z, m=model: torch.softmax(m(Z), dim=1)[:, 1], 1,
                             alpha=0.05, grid_size=7, n_ice=5, seed=2)
        for i in range(0, 300, 20):
            pdp.explain(X[i:i + 20].to(device))
        out[key] = pdp
    _close(out["gpu"].pd, out["cpu"].pd)
    _close(out["gpu"].grid, out["cpu"].grid)


def test_local_attributions_on_cuda_equal_cpu_and_are_complete():
    d = 6
    X, _ = _data(8, d, 2)
    res = {}
    for key, device in (("cpu", "cpu"), ("gpu", GPU)):
        model = _mlp64(d, 2, device)
        exp = LocalAttributor(lambda Z, m=model: torch.softmax(m(Z), dim=1)[:, 1],
                             "integrated_gradients", 0.0, method_kwargs={"n_steps": 64})
        res[key] = exp.attribute(X.to(device))
        assert res[key].attributions.device.type == device
    _close(res["gpu"].attributions, res["cpu"].attributions)
    assert res["gpu"].delta.abs().max().item() < 1e-3  # IG's own completeness at 64 steps


def test_probit_head_fires_erics_on_cuda_equal_cpu():
    """The Probit head is closed-form float64: FIRES weights and ERICS statistics match."""
    d = 20
    X, y = _data(400, d, 2)
    out = {}
    for key, device in (("cpu", "cpu"), ("gpu", GPU)):
        head = ProbitHead(d, device=device)
        fires, erics = FIRES(head, n_selected=2), ERICS(head)
        for i in range(0, 400, 20):
            fires.learn(X[i:i + 20].to(device), y[i:i + 20].to(device))
            erics.observe()
        out[key] = (fires, erics)
    _close(out["gpu"][0].raw_weights, out["cpu"][0].raw_weights)
    assert out["gpu"][0].selected.tolist() == out["cpu"][0].selected.tolist()
    assert sorted(out["gpu"][0].selected.tolist()) == [0, 1]  # the two informative features
    assert out["gpu"][1].alerts == out["cpu"][1].alerts
    assert out["gpu"][1].drift_statistic == pytest.approx(out["cpu"][1].drift_statistic,
                                                          rel=1e-9, abs=1e-12)


def test_monte_carlo_head_on_cuda_is_reproducible_and_resumes(tmp_path):
    """The MLP head's noise is drawn on the device: same seed, same run; a checkpoint taken
    half way resumes bit for bit; another seed draws other noise."""
    d = 8
    X, y = _data(600, d, 2)
    X, y = X.float(), y

    def make(seed=1):
        head = MLPHead(d, hidden=(16,), seed=seed, device=GPU)
        return head, FIRES(head, n_selected=2)

    def feed(fires, lo, hi):
        for i in range(lo, hi, 20):
            fires.learn(X[i:i + 20].to(GPU), y[i:i + 20].to(GPU))

    (_, f1), (h2, f2) = make(), make()
    feed(f1, 0, 600)
    feed(f2, 0, 300)
    path = save_checkpoint({"head": h2.state_dict(), "fires": f2.state_dict()}, tmp_path / "h.pt")
    h3, f3 = make()
    state = load_checkpoint(path)
    h3.load_state_dict(state["head"])
    f3.load_state_dict(state["fires"])
    feed(f3, 300, 600)
    assert torch.equal(f1.raw_weights, f3.raw_weights)
    assert torch.isfinite(f1.raw_weights).all()
    _, f4 = make(seed=2)
    feed(f4, 0, 600)
    assert not torch.equal(f1.raw_weights, f4.raw_weights)


def test_online_learner_divergence_check_on_cuda():
    """The divergence guard's one stacked read works on the device and names the row."""
    learner = OnlineClassifier(lambda n, c: MLP(n, c, hidden=(8,)), lr=0.01, seed=0,
                            device=GPU, classes=[0, 1])
    X = torch.randn(32, 3, device=GPU)
    y = (X[:, 0] > 0).long()
    learner.learn(X, y)
    bad = X.clone()
    bad[5, 1] = float("nan")
    with pytest.raises((DivergenceError, ValueError), match="row"):
        learner.learn(bad, y)


def test_cli_run_on_cuda_resumes_exactly(tmp_path):
    """``torchstream run --device cuda`` trains and explains on the GPU; a run stopped at half
    way and resumed ends with the uninterrupted run's explanations."""
    common = ["run", "--n-samples", "400", "--batch-size", "8", "--no-progress", "--device",
              GPU, "--explain", "ipfi,isage,ipdp"]
    full, part = tmp_path / "full.json", tmp_path / "part.json"
    assert main([*common, "--logdir", str(tmp_path / "a"), "--result-json", str(full)]) == 0
    ck = tmp_path / "c.pt"
    assert main([*common, "--logdir", str(tmp_path / "b"), "--steps", "25",
                 "--checkpoint", str(ck), "--checkpoint-every", "25"]) == 0
    assert main([*common, "--logdir", str(tmp_path / "b"), "--resume", str(ck),
                 "--result-json", str(part)]) == 0
    a, b = json.loads(full.read_text()), json.loads(part.read_text())
    assert a["explanations"] == b["explanations"]
    values = [v for exp in a["explanations"].values() if isinstance(exp, dict)
              for v in exp.values() if isinstance(v, float)]
    assert values and all(v == v for v in values)
