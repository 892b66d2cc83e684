"""One stream on two processes (torch.distributed, gloo): the model one process trains at twice
the batch, the same test metrics, an explanation within the explainers' confidence bounds of one
process's, and a worker that fails or dies stops the run with its name."""

from __future__ import annotations

import io
import os
import pickle
from functools import partial

import pytest
import torch

from torchstream.distributed.data_parallel import (
    ParallelPrequential,
    ParallelResult,
    WorkerSetup,
    cost_per_step,
    run_data_parallel,
)
from torchstream.distributed.exchange import Exchange, shard
from torchstream.distributed.processes import WorkerFailed, launch, read_result, worker_cpus
from torchstream.distributed.sharded import ShardedLearner, join_explainer
from torchstream.evaluate import Prequential
from torchstream.explain import IncrementalPFI
from torchstream.learners import OnlineClassifier
from torchstream.models import MLP
from torchstream.streams import agrawal_drift

pytest.importorskip("torch.distributed")
if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
    pytest.skip("torch.distributed with gloo is not available", allow_module_level=True)

ROWS, BATCH = 3200, 160  # a global batch of 320 rows: the smoother folds it in blocks of 256


def build(rank: int, *, rows: int = ROWS, fail_rank: int | None = None) -> WorkerSetup:
    """The same stream and learner on every rank; iPFI seeded per rank."""
    if rank == fail_rank:
        raise ValueError(f"no data for rank {rank}")
    stream = agrawal_drift(n_samples=rows, position=rows // 2, seed=3)
    learner = OnlineClassifier(partial(MLP, hidden=(16,)), lr=5e-3, scale_inputs=True, seed=0)
    ipfi = IncrementalPFI(learner, "cross_entropy", stream.n_features, alpha=0.01,
                          feature_names=stream.schema.columns, seed=100 + rank)
    return WorkerSetup(stream, learner, [ipfi])


def one_process(batch_size: int, rows: int = ROWS
                ) -> tuple[dict[str, torch.Tensor], float, IncrementalPFI]:
    """One process, plainly: test, explain, learn each batch of ``batch_size`` rows."""
    torch.manual_seed(0)
    setup = build(0, rows=rows)
    stream, learner, (ipfi,) = setup.stream, setup.learner, setup.explainers
    learner.register_classes(stream.classes)
    correct = n = 0
    for X, y in stream.batches(batch_size):
        with torch.no_grad():
            correct += int((learner(X).argmax(1) == y).sum())
        n += len(y)
        ipfi.explain(X, y)
        learner.learn(X, y)
    assert learner.module is not None
    return dict(learner.module.state_dict()), correct / n, ipfi


def test_two_workers_train_the_model_one_process_trains_at_twice_the_batch():
    result = run_data_parallel(build, workers=2, batch_size=BATCH)
    state, accuracy, ipfi = one_process(2 * BATCH)
    assert result.rows == ROWS and result.workers == 2
    assert set(result.state) == set(state)
    for name, value in state.items():  # every replica took the same step as one process
        assert torch.allclose(result.state[name], value, atol=1e-5, rtol=0), name
    assert result.metrics["accuracy"] == pytest.approx(accuracy, abs=1e-12)
    control, _, _ = one_process(BATCH)  # the test tells batch 2B from batch B apart
    assert any(not torch.allclose(result.state[k], v, atol=1e-3) for k, v in control.items())
    assert list(result.importances) == [ipfi.name]
    merged, half = result.importances[ipfi.name], result.half_widths[ipfi.name]
    single = ipfi.as_dict()
    single_half = dict(zip(single, ipfi.half_width(0.05).tolist()))
    assert set(merged) == set(single)
    for feature in single:  # equal in distribution: the two estimates within their bounds
        assert abs(merged[feature] - single[feature]) <= half[feature] + single_half[feature]
    assert max(merged, key=merged.get) == max(single, key=single.get)  # the same top feature
    # per step each worker sent its weighted gradients and its rows' contributions
    n_params = sum(v.numel() for k, v in state.items() if "scaler" not in k)
    assert result.bytes_per_step["gradients"] >= 4 * n_params - 1e-9
    assert result.bytes_per_step["contributions"] > 0


def test_one_worker_in_this_process_is_the_plain_loop_also_past_the_smoothers_blocks():
    """One worker (no process group: nothing to exchange) runs the plain prequential loop:
    the same weights, metrics and importances to the digit (at a batch of 600 rows, which the
    smoother folds in blocks of 256)."""
    plain, joined = build(0), build(0)
    runner = Prequential(plain.learner, plain.stream, batch_size=600,
                         plugins=list(plain.explainers))
    expected = runner.run()
    exchange = Exchange(0, 1)
    worker = ParallelPrequential(ShardedLearner(joined.learner, exchange), joined.stream,
                                 batch_size=600,
                                 plugins=[join_explainer(e, exchange) for e in joined.explainers])
    got = worker.run()
    assert got.metrics == expected.metrics and got.n_steps == expected.n_steps == 6
    assert torch.equal(joined.explainers[0].importance, plain.explainers[0].importance)
    assert joined.explainers[0].n_explained == ROWS - 600  # the first batch is only stored
    for (name, a), b in zip(joined.learner.module.state_dict().items(),
                            plain.learner.module.state_dict().values()):
        assert torch.equal(a, b), name
    assert exchange.explainers == list(joined.explainers)


def test_a_worker_that_fails_stops_the_run_with_its_error():
    with pytest.raises(WorkerFailed, match=r"worker 1 \(pid \d+\) failed: ValueError: no data "
                                           r"for rank 1; the run is stopped"):
        run_data_parallel(partial(build, fail_rank=1), workers=2, batch_size=BATCH)


def test_the_shards_of_a_global_batch_cover_it_once_in_order():
    for n in (1, 5, 16, 17):
        for workers in (1, 2, 3):
            parts = [shard(n, workers, r) for r in range(workers)]
            assert [i for s in parts for i in range(n)[s]] == list(range(n))
            sizes = [s.stop - s.start for s in parts]
            assert max(sizes) - min(sizes) <= 1


def test_the_cost_model_counts_a_ring_all_reduce_and_the_contributions():
    one = cost_per_step(n_params=1000, n_features=10, batch_size=4, workers=1)
    assert one == {"gradients": 0.0, "contributions": 0.0, "predictions": 0.0}
    four = cost_per_step(n_params=1000, n_features=10, batch_size=4, workers=4)
    ring = 2 * 3 / 4  # a ring all-reduce sends 2 (N - 1) / N of its buffer
    assert four["gradients"] == 8 * 1000 * ring  # one float64 buffer
    assert four["contributions"] == 8 * (4 * 4) * 10 * ring  # the global batch's rows
    assert four["predictions"] == 8 * (4 * 4) * 2 * ring  # probabilities of 2 classes


def build_counting(rank: int, *, rows: int, log: str) -> WorkerSetup:
    """:func:`build`, with every ``all_gather`` and ``all_reduce`` of this worker written to
    ``log`` (one line per call: its rank and name)."""
    for name in ("all_gather", "all_reduce"):
        own = getattr(torch.distributed, name)

        def counted(*args: object, _own=own, _name=name, **kwargs: object) -> object:
            with open(log, "a") as f:
                f.write(f"{rank} {_name}\n")
            return _own(*args, **kwargs)

        setattr(torch.distributed, name, counted)
    return build(rank, rows=rows)


def test_a_step_waits_for_the_other_worker_once(tmp_path):
    """Each step has one collective: one ``all_reduce`` of the predictions, the explainer's
    contributions, the gradients, the loss and the stop request (plus one ``all_reduce`` before
    the first step, agreeing to start) — also in the short last batch, where worker 1 has no
    rows. Each worker hands it the global batch's rows of predictions and contributions, its
    gradients and two riders, in float64."""
    log = tmp_path / "calls.txt"
    rows = 10 * 64 + 1  # ten global batches of 64 rows, then one of a single row
    result = run_data_parallel(partial(build_counting, rows=rows, log=str(log)), workers=2,
                               batch_size=32)
    assert result.rows == rows and result.steps == 11
    calls = log.read_text().split("\n")[:-1]
    for rank in (0, 1):
        mine = [c.split()[1] for c in calls if c.split()[0] == str(rank)]
        assert mine.count("all_gather") == 0, rank
        assert mine.count("all_reduce") == 11 + 1, rank
    n_params = sum(v.numel() for k, v in result.state.items() if "scaler" not in k)
    per_step = {"gradients": 8 * n_params, "loss": (8 * 2 * 11 + 8) / 11,  # + the start
                "predictions": 8 * 2 * rows / 11, "contributions": 8 * 9 * (rows - 64) / 11}
    for kind, expected in per_step.items():  # the first batch only fills iPFI's storage
        assert result.bytes_per_step[kind] == pytest.approx(expected, rel=1e-12), kind
    state, _, _ = one_process(64, rows)
    for name, value in state.items():  # the riders change no step
        assert torch.allclose(result.state[name], value, atol=1e-5, rtol=0), name



class _NotAllowed:
    def __init__(self) -> None:
        self.value = 1


def test_a_worker_result_is_read_weights_only():
    """Rank 0's result crosses to the parent as torch.save bytes read weights-only: the
    declared result class and tensors come back; an object of any other class is refused."""
    result = ParallelResult(4, 1.0, {"accuracy": 0.5}, {}, {}, {"w": torch.ones(2)}, 2)
    buffer = io.BytesIO()
    torch.save(result, buffer)
    back = read_result(buffer.getvalue(), (ParallelResult,))
    assert back.metrics == result.metrics and torch.equal(back.state["w"], torch.ones(2))
    with pytest.raises(pickle.UnpicklingError):
        read_result(buffer.getvalue())  # ParallelResult not declared
    buffer = io.BytesIO()
    torch.save(_NotAllowed(), buffer)
    with pytest.raises(pickle.UnpicklingError):
        read_result(buffer.getvalue(), (ParallelResult,))


def _affinity(exchange: Exchange) -> list[list[int]] | None:
    """Every worker's CPUs, on rank 0."""
    parts = exchange.gather_objects(sorted(os.sched_getaffinity(0)))
    return None if parts is None else [list(p) for p in parts]  # type: ignore[arg-type]


def _polls(exchange: Exchange) -> list[bool] | None:
    """Whether each worker polls its collectives, on rank 0."""
    parts = exchange.gather_objects(exchange.poll)
    return None if parts is None else [bool(p) for p in parts]


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to pin two workers")
def test_workers_poll_their_collective_only_with_a_cpu_each():
    cpus = len(os.sched_getaffinity(0))
    assert launch(_polls, 2) == [True, True]
    assert launch(_polls, cpus + 1, pin=False) == [False] * (cpus + 1)  # they share CPUs
    assert launch(_polls, 2, threads=cpus) == [False, False]


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to pin two workers")
def test_pinned_workers_run_on_a_cpu_each():
    allowed = sorted(os.sched_getaffinity(0))
    assert worker_cpus(2) == [{allowed[0]}, {allowed[1]}]
    assert worker_cpus(1, threads=2) == [set(allowed[:2])]  # a worker of two threads: two CPUs
    assert worker_cpus(len(allowed) + 1) == [None] * (len(allowed) + 1)  # too few: not pinned
    assert worker_cpus(2, threads=len(allowed)) == [None, None]
    assert launch(_affinity, 2) == [[allowed[0]], [allowed[1]]]
    assert launch(_affinity, 2, pin=False) == [allowed, allowed]


def test_a_model_with_running_statistics_is_refused_by_the_workers():
    """Batch normalisation keeps running statistics of the rows each replica trains on: the
    replicas would part, so the first test refuses it, naming the layer."""
    def model(n_features: int, n_outputs: int) -> torch.nn.Module:
        return torch.nn.Sequential(torch.nn.Linear(n_features, 4), torch.nn.BatchNorm1d(4),
                                   torch.nn.Linear(4, n_outputs))

    exchange = Exchange(0, 1)
    learner = ShardedLearner(OnlineClassifier(model, seed=0), exchange)
    X, y = torch.randn(4, 3), torch.tensor([0, 1, 0, 1])
    learner.register_classes([0, 1])
    learner.arm(X)
    exchange.labels = (y, 0)
    with pytest.raises(ValueError, match=r"layer '1' \(BatchNorm1d\) keeps running statistics"):
        learner(X)
