"""Per-step records and the History sink stay bounded on long runs: records go to a CSV file
(checkpoints hold its length; resuming truncates it) or to a bounded in-memory window that says
what it dropped."""

from __future__ import annotations

import inspect
import io
import itertools
import math
import types
import warnings

import pytest
import torch

import torchstream.evaluate.runner as runner_module
from torchstream.evaluate import Evaluator, Prequential
from torchstream.evaluate.records import DEFAULT_MAX_RECORDS, RecordFile, StepRecords
from torchstream.learners import OnlineClassifier
from torchstream.models import MLP
from torchstream.sinks import History
from torchstream.sinks.history import DEFAULT_MAX_POINTS
from torchstream.streams import SEA


@pytest.fixture
def clock(monkeypatch):
    """The runner's clock advances by exactly 0.25 s per reading, so the recorded seconds (and
    hence a records file's bytes) are the same in every run."""
    ticks = itertools.count()
    monkeypatch.setattr(runner_module, "time",
                        types.SimpleNamespace(perf_counter=lambda: next(ticks) * 0.25))


def make(**kwargs):
    learner = OnlineClassifier(lambda d, k: MLP(d, k, hidden=(4,)), lr=0.05, seed=0)
    return Prequential(learner, SEA(seed=3, n_samples=120), batch_size=4, **kwargs)


def test_records_file_of_a_resumed_run_equals_the_uninterrupted_one(tmp_path, clock):
    whole = make(records_path=tmp_path / "a" / "steps.csv")
    result = whole.run()
    whole.close()
    expected = (tmp_path / "a" / "steps.csv").read_bytes()
    assert expected.count(b"\n") == 30 + 1  # header + one line per step

    path = tmp_path / "b" / "steps.csv"
    first = make(records_path=path)
    first.run(steps=10)
    ckpt = first.save(tmp_path / "run.pt")
    first.run(steps=8)  # progress after the checkpoint, then the process dies
    first.close()
    assert path.read_bytes().count(b"\n") == 18 + 1
    second = make(records_path=path)
    second.resume(ckpt)
    rest = second.run()
    second.close()
    assert path.read_bytes() == expected  # the 8 lines after the checkpoint were cut off
    assert rest.records_path == str(path) and rest.records_dropped == 0
    assert isinstance(rest.steps, RecordFile) and len(rest.steps) == 30
    assert rest.to_frame().equals(result.to_frame())
    assert rest.steps[29] == result.steps[29]


def test_checkpoint_holds_the_file_length_not_the_records(tmp_path):
    ev = make(records_path=tmp_path / "steps.csv")
    ev.run(steps=5)
    state = ev.state_dict()["records"]
    size = (tmp_path / "steps.csv").stat().st_size
    assert state["kind"] == "file" and state["offset"] == size and state["n_total"] == 5
    ev.run(steps=25)
    later = ev.state_dict()["records"]
    assert later["offset"] == (tmp_path / "steps.csv").stat().st_size > size
    assert len(_saved(later)) == len(_saved(state))  # same size whatever the row count


def _saved(obj) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def test_file_and_memory_records_read_back_identically(tmp_path, clock):
    """NaN, infinities and awkward predictor names survive the CSV; floats are exact."""

    def measure(y, y_pred):
        return math.inf if float(y.sum()) > 1 else (math.nan if float(y.sum()) else 0.1)

    measure.name = "odd"

    def build(**kwargs):
        learners = {f'a,"b"{i}': OnlineClassifier(lambda d, k: MLP(d, k, hidden=(4,)), lr=0.05,
                                                 seed=i) for i in range(2)}
        learners["nan"] = OnlineClassifier(lambda d, k: MLP(d, k, hidden=(3,)), lr=0.1, seed=7)
        return Evaluator(learners, SEA(seed=1, n_samples=60), batch_size=3,
                         strategy="holdout", strategy_args={"test_interval": 4},
                         step_measures=[measure], **kwargs)

    memory = build().run().to_frame()
    on_file = build(records_path=tmp_path / "steps.csv").run().to_frame()
    assert on_file.equals(memory)
    assert list(on_file["predictor"].unique()) == ['a,"b"0', 'a,"b"1', "nan"]
    assert on_file["accuracy"].isna().any() and on_file["odd"].isna().any()
    assert (on_file["odd"] == math.inf).any()


def test_window_keeps_the_last_records_and_says_how_many_it_dropped(tmp_path, clock):
    assert DEFAULT_MAX_RECORDS == 10_000
    assert make().records.max_records == DEFAULT_MAX_RECORDS
    full = make(records_path=tmp_path / "steps.csv").run().to_frame()
    result = make(max_records=12).run()
    assert result.records_dropped == 18 and len(result.steps) == 12
    with pytest.warns(UserWarning, match=r"last 12 of 30 records \(18 older ones"):
        frame = result.to_frame()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result.to_frame()  # once
    assert frame.equals(full.iloc[18:].reset_index(drop=True))
    short = make().run()
    assert short.records_dropped == 0 and len(short.to_frame()) == 30


def test_window_resume_is_exact_and_the_window_is_bounded_in_the_checkpoint(tmp_path, clock):
    whole = make(max_records=12).run()
    first = make(max_records=12)
    first.run(steps=15)
    state = first.state_dict()["records"]
    assert state["kind"] == "window" and len(state["rows"]) == 12 and state["n_total"] == 15
    ckpt = first.save(tmp_path / "run.pt")
    second = make(max_records=12)
    second.resume(ckpt)
    rest = second.run()
    assert rest.records_dropped == whole.records_dropped == 18
    assert rest.steps == whole.steps


def test_resume_with_another_records_file(tmp_path, clock):
    first = make(records_path=tmp_path / "a.csv")
    first.run(steps=10)
    ckpt = first.save(tmp_path / "run.pt")
    first.close()
    expected = (tmp_path / "a.csv").read_bytes()
    # a new path: the checkpoint's records are copied there, and that is said
    moved = make(records_path=tmp_path / "new" / "b.csv")
    with pytest.warns(UserWarning, match="first 10 records were copied"):
        moved.resume(ckpt)
    assert (tmp_path / "new" / "b.csv").read_bytes() == expected
    # a file that does not hold the checkpoint's records: error naming it
    (tmp_path / "c.csv").write_text("step,start\n1,2\n" * 50)
    other = make(records_path=tmp_path / "c.csv")
    with pytest.raises(ValueError, match=r"c\.csv.*does not hold the checkpoint's records"):
        other.resume(ckpt)
    assert other.step == 0 and other.position == 0  # nothing was loaded
    assert other.learner.module is None  # the learner was not loaded either (built lazily)
    assert (tmp_path / "c.csv").read_text() == "step,start\n1,2\n" * 50
    # the original file changed: error
    (tmp_path / "a.csv").write_bytes(expected.replace(b"learner", b"LEARNER", 1))
    with pytest.raises(ValueError, match=r"a\.csv.*does not hold"):
        make(records_path=tmp_path / "a.csv").resume(ckpt)
    # records kept in memory cannot continue records on file
    with pytest.raises(ValueError, match="records are in the file"):
        make().resume(ckpt)


def test_a_new_run_replaces_an_existing_records_file_and_says_so(tmp_path):
    path = tmp_path / "steps.csv"
    path.write_text("old\n" * 1000)
    ev = make(records_path=path)
    with pytest.warns(UserWarning, match="exists .*this new run replaces it"):
        ev.run(steps=3)
    ev.close()
    assert path.read_text().splitlines()[0].startswith("step,start,predictor,instance")
    assert len(path.read_text().splitlines()) == 4
    with pytest.raises(ValueError, match="is a directory"):
        make(records_path=tmp_path)


def test_step_records_reject_a_changed_set_of_fields():
    records = StepRecords()
    records.add({"step": 0, "a": 1.0})
    records.commit()
    records.add({"step": 1, "b": 1.0})
    with pytest.raises(ValueError, match=r"step 1 has the fields \['step', 'b'\]"):
        records.commit()
    with pytest.raises(ValueError, match="max_records"):
        StepRecords(max_records=0)


def test_history_keeps_the_last_points_of_each_tag():
    assert DEFAULT_MAX_POINTS == 10_000 and History().max_points == DEFAULT_MAX_POINTS
    history = History(max_points=3)
    history.log_scalars(0, {"a": 0.0, "b": 10.0})
    history.log_scalars(1, {"a": 1.0})
    history.log_scalars(2, {"a": 2.0})
    assert history.dropped == {}
    with pytest.warns(UserWarning, match="last 3 points of each tag"):
        history.log_scalars(3, {"a": 3.0})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        history.log_scalars(4, {"a": 4.0})  # once
    assert history.steps("a") == [2, 3, 4] and history.values("a") == [2.0, 3.0, 4.0]
    assert history.series == {"a": [(2, 2.0), (3, 3.0), (4, 4.0)], "b": [(0, 10.0)]}
    assert history.dropped == {"a": 2}
    assert history.last() == {"a": 4.0, "b": 10.0}
    assert list(history.to_frame().index) == [0, 2, 3, 4]

    state = history.state_dict()
    restored = History(max_points=3)
    restored.load_state_dict(state)
    for h in (history, restored):
        h.log_scalars(5, {"a": 5.0})
    assert restored.series == history.series and restored.dropped == {"a": 3}
    smaller = History(max_points=2)
    smaller.load_state_dict(state)
    assert smaller.series["a"] == [(3, 3.0), (4, 4.0)] and smaller.dropped == {"a": 3}
    with pytest.raises(ValueError, match="max_points"):
        History(max_points=0)


def test_history_checkpoint_is_bounded():
    history = History(max_points=50)
    sizes = []
    with pytest.warns(UserWarning, match="last 50 points"):
        for n in (100, 1000):
            for step in range(n):
                history.log_scalars(step, {"x": step / 7, "y": -step / 3})
            sizes.append(len(_saved(history.state_dict())))
    assert all(len(p) == 50 for p in history.series.values())
    assert abs(sizes[1] - sizes[0]) < 0.05 * sizes[0]
    state = torch.load(io.BytesIO(_saved(history.state_dict())), weights_only=True)
    restored = History(max_points=50)
    restored.load_state_dict(state)
    assert restored.series == history.series and restored.dropped == {"x": 1050, "y": 1050}
    legacy = History()  # a state of (step, value) pairs, as written before
    legacy.load_state_dict({"config": {}, "series": {"a": [(1, 2.0), (3, 4.0)]}})
    assert legacy.series == {"a": [(1, 2.0), (3, 4.0)]} and legacy.dropped == {}
    with pytest.raises(ValueError, match=r"tags \['a'\]"):
        History().load_state_dict({"config": {}, "steps": {"a": torch.arange(3)},
                                   "values": {"a": torch.zeros(2)}})


def test_resumed_history_sink_equals_the_uninterrupted_one(tmp_path):
    whole = History(max_points=10)
    with pytest.warns(UserWarning, match="last 10 points"):
        make(sinks=[whole]).run()
    first = make(sinks=[History(max_points=10)], records_path=tmp_path / "steps.csv")
    with pytest.warns(UserWarning, match="last 10 points"):
        first.run(steps=17)
    ckpt = first.save(tmp_path / "run.pt")
    rest = History(max_points=10)
    second = make(sinks=[rest], records_path=tmp_path / "steps.csv")
    second.resume(ckpt)
    second.run()
    assert rest.series == whole.series and rest.dropped == whole.dropped
    assert rest.steps("metrics/accuracy/cumulative") == list(range(84, 121, 4))  # rows seen


def test_noise_variability_keeps_the_last_values_and_resumes_exactly():
    from torchstream.evaluate.noise import NoiseVariability

    def make_nv():
        return NoiseVariability(n_samples=2, noise_scale=0.5, seed=0, max_values=7)

    stream = SEA(seed=2, n_samples=60)
    whole = make_nv()
    Evaluator(OnlineClassifier(lambda d, k: MLP(d, k, hidden=(4,)), lr=0.05, seed=0), stream,
              batch_size=3, plugins=[whole], record_steps=False).run()
    assert len(whole.values) == 7 and whole.n_dropped == 13
    part = make_nv()
    ev = Evaluator(OnlineClassifier(lambda d, k: MLP(d, k, hidden=(4,)), lr=0.05, seed=0), stream,
                   batch_size=3, plugins=[part], record_steps=False)
    ev.run(steps=9)
    state = ev.state_dict()
    assert len(state["plugins"]["noise_variability"]["values"]) == 7
    rest = make_nv()
    ev2 = Evaluator(OnlineClassifier(lambda d, k: MLP(d, k, hidden=(4,)), lr=0.05, seed=0), stream,
                    batch_size=3, plugins=[rest], record_steps=False)
    ev2.load_state_dict(state)
    ev2.run()
    assert rest.values == whole.values and rest.n_dropped == 13
    with pytest.raises(ValueError, match="max_values"):
        NoiseVariability(max_values=0)


def test_erics_traces_are_bounded_by_default():
    from torchstream.drift.erics import ERICS

    erics = ERICS()
    assert inspect.signature(ERICS).parameters["history"].default == 10_000
    traces = (erics.ma_trace, erics.threshold_trace, erics.drift_trace)
    assert [t.maxlen for t in traces] == [10_000] * 3


def test_metric_checkpoint_holds_pending_rows_as_one_pair():
    """Rows not yet folded (fewer than ``flush_rows``) are saved as one tensor pair, so the
    state's size does not depend on how many batches brought them; resuming is bit-exact."""
    from torchstream.evaluate import Accuracy, LogLoss

    gen = torch.Generator().manual_seed(0)
    batches = [(torch.randint(0, 2, (1,), generator=gen), torch.rand(1, 2, generator=gen))
               for _ in range(300)]
    for make_metric in (Accuracy, LogLoss):
        metric = make_metric()
        for y, p in batches[:200]:
            metric.update(y, p)
        state = metric.state_dict()
        assert len(state["pending"]) == 1 and state["pending"][0][0].shape == (200,)
        resumed = make_metric()
        resumed.load_state_dict(state)
        for m in (metric, resumed):
            for y, p in batches[200:]:
                m.update(y, p)
        assert resumed.get() == metric.get()
