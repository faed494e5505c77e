#!/usr/bin/env bash
# The on-device check, in one go, for a machine with a CUDA GPU and CuPy (and, for the
# comparisons, PyTorch with CUDA): the gpu-marked tests, then the fused-kernel
# benchmarks. Results go to $OUT (default ./out):
#   nvidia-smi.txt      the device
#   gpu_tests.txt       python -m pytest -m gpu (every gpu test of the suite)
#   bench_gpu.txt       tools/bench.py kernels --gpu (softmax GB/s, attention TFLOP/s)
#   bench_kernels.json  the same numbers, machine-readable
# Usage: OUT=/some/dir bash tools/gpu_check.sh [--quick]   (about 5 minutes on an H200)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out}
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
$PY -c "import cupy, tinytensor as tt; print('cupy', cupy.__version__, 'cuda available:', tt.cuda_is_available())" \
    2>&1 | tee -a "$OUT/nvidia-smi.txt"
timeout 420 $PY -m pytest -m gpu -q -p no:cacheprovider -o addopts="" --durations=15 tests 2>&1 \
    | tee "$OUT/gpu_tests.txt"
tests_rc=${PIPESTATUS[0]}
timeout 300 $PY tools/bench.py kernels --gpu "$@" 2>&1 | tee "$OUT/bench_gpu.txt"
bench_rc=${PIPESTATUS[0]}
echo "gpu tests exit $tests_rc, benchmarks exit $bench_rc" | tee -a "$OUT/gpu_tests.txt"
exit $(( tests_rc != 0 || bench_rc != 0 ))
