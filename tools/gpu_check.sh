#!/usr/bin/env bash
# The on-device check, in one go, for a machine with a CUDA GPU and CuPy (and, for the
# comparisons, PyTorch with CUDA): the gpu-marked tests, then the fused-kernel
# benchmarks. Results go to $OUT (default ./out):
#   nvidia-smi.txt      the device
#   gpu_tests.txt       python -m pytest -m gpu (every gpu test of the suite)
#   bench_gpu.txt       tools/bench.py kernels --gpu (softmax GB/s, attention TFLOP/s)
#   bench_kernels.json  the same numbers, machine-readable
# Without a usable GPU it stops at once and exits 2; if no gpu test passes it exits 1:
# a run that measured nothing never looks like a pass.
# Usage: OUT=/some/dir bash tools/gpu_check.sh [--quick]   (about 5 minutes on an H200)
set -uo pipefail
for arg in "$@"; do  # a question about the check must not start it
    case "$arg" in
        -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0;;
        --quick) ;;
        *) echo "gpu_check: unknown argument '$arg'; usage: OUT=/some/dir bash tools/gpu_check.sh [--quick]" >&2; exit 2;;
    esac
done
cd "$(dirname "$0")/.."
OUT=${OUT:-out}
# a bare device machine may not have run `pip install -e .`
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
# the gpu tests skip, and so pass, without a GPU: check for one before running anything
if ! reason=$($PY -c "from tinytensor.device import cupy_module; cupy_module()" 2>&1 | tail -n 1); then
    echo "gpu_check: no usable CUDA GPU: ${reason#RuntimeError: }" >&2
    echo "gpu_check: nothing was measured" >&2
    exit 2
fi
mkdir -p "$OUT"
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
$PY -c "import cupy; print('cupy', cupy.__version__)" 2>&1 | tee -a "$OUT/nvidia-smi.txt"
timeout 420 $PY -m pytest -m gpu -q -p no:cacheprovider -o addopts="" --durations=15 tests 2>&1 \
    | tee "$OUT/gpu_tests.txt"
tests_rc=${PIPESTATUS[0]}
if ! grep -Eq "[0-9]+ passed" "$OUT/gpu_tests.txt"; then
    echo "gpu_check: no gpu test passed (all skipped or none collected)" | tee -a "$OUT/gpu_tests.txt" >&2
    [ "$tests_rc" -ne 0 ] || tests_rc=1
fi
timeout 300 $PY tools/bench.py kernels --gpu "$@" 2>&1 | tee "$OUT/bench_gpu.txt"
bench_rc=${PIPESTATUS[0]}
echo "gpu tests exit $tests_rc, benchmarks exit $bench_rc" | tee -a "$OUT/gpu_tests.txt"
exit $(( tests_rc != 0 || bench_rc != 0 ))
