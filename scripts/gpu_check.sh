#!/usr/bin/env bash
# The GPU check, in one go, from the repository root of a machine with a CUDA device:
#
#   bash scripts/gpu_check.sh [OUTPUT_DIR]
#
# 1. uses that machine's own Python and CUDA build of torch (never reinstalls torch; it may be
#    another torch version than constraints.txt pins for the CPU), puts this tree on the path,
#    and installs the missing pure dependencies from wheels in .whl/ when that folder exists
#    (river and captum: `pip download --no-deps -d .whl river==... captum==...`);
# 2. runs every CUDA test of the suite (`pytest -m cuda`: tests/test_cuda.py and the tests
#    whose name says cuda);
# 3. runs scripts/bench_gpu.py --compile (CPU against CUDA in the same run, eager and with
#    compile=True, host-device syncs per step, a profiler table of the explainers' steps).
#
# Everything printed is also written to OUTPUT_DIR (default: $OUT, else gpu-check/).
set -u
out=${1:-${OUT:-gpu-check}}
mkdir -p "$out"
py=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
wheels=${WHEELS:-.whl}
if [ -d "$wheels" ] && ls "$wheels"/*.whl >/dev/null 2>&1; then
    "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/torchstream-site "$wheels"/*.whl || exit 1
    export PYTHONPATH=/tmp/torchstream-site
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export TORCHSTREAM_HOME=${TORCHSTREAM_HOME:-/tmp/torchstream-home}

{
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    "$py" -c "import sys, torch, river, captum, torchstream
print('python', sys.version.split()[0], '| torch', torch.__version__, '| cuda', torch.version.cuda,
      '| river', river.__version__, '| captum', captum.__version__,
      '| torchstream', torchstream.__version__, '|', torch.cuda.get_device_name(0))"
} 2>&1 | tee "$out/versions.txt"

status=0
timeout "${TEST_TIMEOUT:-240}" "$py" -m pytest -m cuda -q -rs -p no:cacheprovider \
    --continue-on-collection-errors tests 2>&1 | tee "$out/cuda_tests.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

timeout "${BENCH_TIMEOUT:-480}" "$py" scripts/bench_gpu.py --compile --steps "${STEPS:-20}" \
    --repeats 3 --json "$out/bench_gpu.json" --profile "$out/profile.txt" 2>&1 \
    | tee "$out/bench_gpu.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
exit $status
