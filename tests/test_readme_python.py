"""The README's "Using it from Python" code runs as written (on fewer rows), and its learner
pickles: the README cannot drift from the code."""

from __future__ import annotations

import io
import pickle
import re
import textwrap
from pathlib import Path

import pytest
import torch

README = Path(__file__).resolve().parents[1] / "README.md"


def python_section_blocks() -> list[str]:
    """The ```python blocks of the README's "## Using it from Python" section, dedented."""
    text = README.read_text(encoding="utf-8")
    start = text.index("## Using it from Python\n")
    end = text.index("\n## ", start + 1)
    blocks = re.findall(r"^( *)```python\n(.*?)^\1```", text[start:end], re.S | re.M)
    return [textwrap.dedent(body) for _, body in blocks]


def fewer_rows(code: str, n: int) -> str:
    """The example with ``n`` rows and its drift in the middle (the knobs must be there)."""
    code, n_subs = re.subn(r"n_samples=[\d_]+", f"n_samples={n}", code)
    code, p_subs = re.subn(r"position=[\d_]+", f"position={n // 2}", code)
    assert (n_subs, p_subs) == (1, 1), "the README example lost its n_samples / position knobs"
    return code


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """The section's first block on 300 rows, then its iPFI block and that runner's run, in
    one namespace, from a temporary folder (TensorBoard writes ``runs/``)."""
    blocks = python_section_blocks()
    assert len(blocks) == 2, "the section's code blocks changed: update this test"
    first, explainers = blocks
    assert "IncrementalPFI" in explainers and "OnlineClassifier(" in first
    cwd = Path.cwd()
    out = io.StringIO()
    namespace: dict[str, object] = {"print": lambda *a: print(*a, file=out)}
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(tmp_path_factory.mktemp("readme"))
        for name, code in (("first block", fewer_rows(first, 300)), ("iPFI block", explainers)):
            exec(compile(code, f"<README {name}>", "exec"), namespace)  # noqa: S102
        namespace["second_result"] = namespace["runner"].run()  # type: ignore[attr-defined]
        namespace["logdirs"] = sorted(p.name for p in Path("runs").iterdir())
    assert Path.cwd() == cwd
    namespace["printed"] = out.getvalue()
    return namespace


def test_the_first_block_runs_and_prints_the_table(ran):
    printed = ran["printed"]
    assert re.search(r"\| rows +\| +300 \|", printed), printed
    assert re.search(r"\| accuracy +\| +0\.\d{4} \|", printed), printed
    # partial(MLP, hidden=(64,)) on Agrawal's 9 features and 2 classes: (9 + 1) * 64 + (64 + 1) * 2
    assert re.search(r"\| n_parameters +\| +770 \|", printed), printed
    assert ran["logdirs"] == ["demo", "x"]  # both blocks' TensorBoard folders


def test_the_ipfi_block_explains_every_feature(ran):
    ipfi, stream = ran["ipfi"], ran["stream"]
    assert ran["second_result"].n_rows == 300
    assert ipfi.n_explained == 299  # the first row has no stored row to swap in
    importance = ipfi.as_dict()
    assert list(importance) == list(stream.schema.columns)
    # the first concept's labels depend on age alone (Agrawal's function 0): it leads
    assert max(importance, key=importance.get) == "age"


def test_the_readme_learner_pickles_and_round_trips(ran):
    learner = ran["learner"]
    assert learner.n_samples_seen == 600  # both runs trained it
    copied = pickle.loads(pickle.dumps(learner))
    X, _ = next(iter(ran["stream"].batches(50)))
    assert torch.equal(copied(X), learner(X))
    y = torch.zeros(X.shape[0], dtype=torch.long)
    copied.learn(X, y)
    learner.learn(X, y)
    assert torch.equal(copied(X), learner(X))  # and learns on identically
