"""Wall time of one sweep grid on a Ray cluster of 1 node and of 2 nodes on this machine.

Starts a head node (``ray start --head --num-cpus C``), runs ``torchstream sweep`` on it, adds a
second node (``ray start --address ... --num-cpus C``, its own temp dir) and runs the same grid
again into another folder; prints the two wall times and stops the nodes it started (by their
process groups). Each run asks for one CPU, so 1 node runs C runs at a time and 2 nodes 2·C.

    python scripts/bench_sweep_cluster.py --runs 4 --rows 3000
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(argv: list[str], env: dict[str, str]) -> int:
    """A ``ray start`` in its own session; its process group (its daemons stay in it)."""
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                            start_new_session=True)
    if proc.wait(timeout=180) != 0:
        os.killpg(proc.pid, signal.SIGKILL)
        raise SystemExit(f"{' '.join(argv[:3])} failed (exit {proc.returncode})")
    return proc.pid


def sweep(config: Path, out: Path) -> float:
    t0 = time.perf_counter()
    done = subprocess.run([str(BIN / "torchstream"), "sweep", str(config), "--out", str(out)],
                          capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"the sweep failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=4, help="runs in the grid (seeds)")
    parser.add_argument("--rows", type=int, default=3000, help="rows per run")
    parser.add_argument("--cpus", type=int, default=1, help="CPUs of each node")
    parser.add_argument("--model", default="mlp")
    parser.add_argument("--explain", default="ipfi")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="ts-bench-"))
    (base / "home").mkdir()
    env = {**os.environ, "HOME": str(base / "home")}
    port = free_port()
    config = base / "grid.toml"
    config.write_text(f"""
[sweep]
name = "bench"
executor = "ray"
ray_address = "127.0.0.1:{port}"
[grid]
seeds = {list(range(args.runs))}
[run]
model = "{args.model}"
n_samples = {args.rows}
batch_size = 8
explain = "{args.explain}"
""")
    groups = []
    try:
        groups.append(start([str(BIN / "ray"), "start", "--head", "--port", str(port),
                             "--num-cpus", str(args.cpus), "--include-dashboard", "false",
                             "--disable-usage-stats", "--ray-client-server-port",
                             str(free_port()), "--temp-dir", str(base / "head")], env))
        one = sweep(config, base / "one")
        groups.append(start([str(BIN / "ray"), "start", "--address", f"127.0.0.1:{port}",
                             "--num-cpus", str(args.cpus), "--disable-usage-stats",
                             "--temp-dir", str(base / "second")], env))
        two = sweep(config, base / "two")
        print(f"{args.runs} runs of {args.rows:,} rows ({args.model}, --explain "
              f"{args.explain}, batch 8), one CPU a run, nodes of {args.cpus} CPU(s): "
              f"1 node {one:.1f} s, 2 nodes {two:.1f} s ({one / two:.2f}x)")
    finally:
        for pgid in groups:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
