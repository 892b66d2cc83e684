"""The CPU thread policy (``torchstream.learners.use_threads``) of the library and the command
line. torch's thread count is process-wide and the policy's memory is per process, so each case
runs in a fresh interpreter; torch is set to 3 threads before torchstream is imported, a count
this policy must turn into 1 (it stands for torch's own default, whatever the machine's)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PRELUDE = """
import json, pickle, warnings
import torch
torch.set_num_threads(3)
from torchstream import OnlineClassifier
from torchstream.learners import ThreadsNotice, use_threads
from torchstream.models import MLP
warnings.simplefilter("always")
def notices(build):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = build()
    return out, [str(w.message) for w in caught if issubclass(w.category, ThreadsNotice)]
"""


def run_python(body: str, env: dict[str, str] | None = None) -> dict:
    """``PRELUDE`` then ``body`` in a fresh interpreter; ``body`` prints one JSON line."""
    environ = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS",
                                                                 "MKL_NUM_THREADS")}
    environ.update(env or {})
    code = PRELUDE + textwrap.dedent(body)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=environ, check=False, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_learner_sets_one_thread_once_and_says_so():
    got = run_python("""
        before = torch.get_num_threads()
        _, first = notices(lambda: OnlineClassifier(MLP))
        after_first = torch.get_num_threads()
        _, second = notices(lambda: OnlineClassifier(MLP))  # settled: nothing more to say
        torch.set_num_threads(3)  # the program's own choice, after the policy: kept
        _, third = notices(lambda: OnlineClassifier(MLP))
        print(json.dumps({"before": before, "after_first": after_first, "first": first,
                          "second": second, "third": third, "end": torch.get_num_threads()}))
    """)
    assert got["before"] == 3 and got["after_first"] == 1
    assert len(got["first"]) == 1
    assert "1 CPU thread (it had 3)" in got["first"][0] and "use_threads(n)" in got["first"][0]
    assert got["second"] == [] and got["third"] == [] and got["end"] == 3


@pytest.mark.parametrize("how", ["use_threads", "torch", "environment"])
def test_a_count_the_program_chose_is_kept(how):
    choose = {"use_threads": "use_threads(2)", "torch": "torch.set_num_threads(2)",
              "environment": "torch.set_num_threads(2)"}[how]
    env = {"OMP_NUM_THREADS": "3"} if how == "environment" else None
    if how == "environment":  # the variable names the choice, even at torch's count at import
        choose = "pass"
    got = run_python(f"""
        {choose}
        chosen = torch.get_num_threads()
        _, said = notices(lambda: OnlineClassifier(MLP))
        print(json.dumps({{"chosen": chosen, "said": said, "end": torch.get_num_threads()}}))
    """, env)
    assert got["said"] == [] and got["end"] == got["chosen"] == (3 if how == "environment" else 2)


def test_use_threads_takes_a_positive_count():
    got = run_python("""
        errors = []
        for bad in (0, -1, 1.5, True, "2"):
            try:
                use_threads(bad)
            except ValueError as e:
                errors.append(str(e))
        print(json.dumps({"errors": errors, "n": use_threads(4), "now": torch.get_num_threads()}))
    """)
    assert len(got["errors"]) == 5 and all("positive integer" in e for e in got["errors"])
    assert got["n"] == got["now"] == 4


def test_a_learner_unpickled_in_a_new_process_follows_the_policy(tmp_path: Path):
    path = tmp_path / "learner.pkl"
    run_python(f"""
        use_threads(3)
        learner = OnlineClassifier(MLP, n_features=2)
        with open({str(path)!r}, "wb") as f:
            pickle.dump(learner, f)
        print("{{}}")
    """)
    got = run_python(f"""
        with open({str(path)!r}, "rb") as f:
            learner, said = notices(lambda: pickle.load(f))
        print(json.dumps({{"said": said, "now": torch.get_num_threads(),
                           "n_features": learner.n_features}}))
    """)
    assert got["n_features"] == 2 and got["now"] == 1 and len(got["said"]) == 1


def test_the_command_line_uses_the_same_policy(tmp_path: Path):
    """``--threads 3`` goes through use_threads: the learner the command builds keeps 3 (a
    plain ``torch.set_num_threads(3)``, torch's count at import here, would be turned into 1)."""
    got = run_python(f"""
        from torchstream.cli import main
        rc, said = notices(lambda: main(["run", "--steps", "40", "--explain", "none",
                                        "--detect", "none", "--threads", "3",
                                        "--logdir", {str(tmp_path)!r}]))
        print(json.dumps({{"rc": rc, "said": said, "now": torch.get_num_threads()}}))
    """)
    assert got["rc"] == 0 and got["said"] == [] and got["now"] == 3
