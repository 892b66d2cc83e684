"""Shared test set-up: where the real data sets (``../shared/data`` from the repo root) live."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from torchstream.learners import use_threads

REPO_ROOT = Path(__file__).resolve().parents[1]

# The package's CPU thread policy, settled before any test: one thread, as the first learner
# would set it, so that no test sees its once-per-process ThreadsNotice among the warnings it
# counts, whichever test runs first (tests/test_learner_threads.py checks the policy in fresh
# processes).
use_threads(1)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test whose name or parameters say ``cuda`` is marked ``cuda``, so ``pytest -m cuda``
    runs every CUDA path of the suite in one go (on a machine with a GPU)."""
    for item in items:
        if "cuda" in item.nodeid.lower():
            item.add_marker(pytest.mark.cuda)


@pytest.fixture(scope="session", autouse=True)
def data_dir() -> Iterator[Path]:
    """Point ``$TORCHSTREAM_DATA`` at ``<repo>/../shared/data`` unless it is already set, so that
    ``torchstream.streams.data_path`` works whatever the working directory of the test run."""
    if os.environ.get("TORCHSTREAM_DATA"):
        yield Path(os.environ["TORCHSTREAM_DATA"])
        return
    with pytest.MonkeyPatch.context() as mp:
        path = REPO_ROOT.parent / "shared" / "data"
        mp.setenv("TORCHSTREAM_DATA", str(path))
        yield path


@pytest.fixture
def adult_csv(data_dir: Path) -> Path:
    """The shared adult.csv; the test is skipped, with the path, where it is not available."""
    path = data_dir / "adult.csv"
    if not path.is_file():
        pytest.skip(f"{path} is not available")
    return path


@pytest.fixture(scope="session", autouse=True)
def checkpoint_key_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Checkpoint signing keys of the tests live in a temporary ``$TORCHSTREAM_HOME``, never in
    the user's own configuration."""
    home = tmp_path_factory.mktemp("torchstream_home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TORCHSTREAM_HOME", str(home))
        yield home


@pytest.fixture(scope="session")
def compiler_works() -> None:
    """Skip (with the reason) where ``torch.compile`` cannot compile a tiny function."""
    try:
        fn = torch.compile(lambda t: t * 2.0 + 1.0, dynamic=False, fullgraph=True)
        assert torch.equal(fn(torch.ones(3)), torch.full((3,), 3.0))
    except Exception as exc:  # no C compiler, an unsupported platform
        pytest.skip(f"torch.compile cannot compile on this machine: {type(exc).__name__}: {exc}")
