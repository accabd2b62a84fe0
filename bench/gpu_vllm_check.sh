#!/usr/bin/env bash
# The one GPU check of pytest-slam's vLLM engine and NVML energy metering (bench/gpu_vllm_check.py).
#
#   bash bench/gpu_vllm_check.sh prepare    # HERE, with a registry: wheels for the GPU box into .whl/
#   bash bench/gpu_vllm_check.sh [MODEL]    # ON THE GPU BOX, from the repo root
#
# On the GPU box it installs what pytest-slam needs from .whl/ (no registry there), installs vLLM when
# it can (from .whl/, else from the index into a venv that keeps the image's torch), then runs
# gpu_vllm_check.py: vLLM serving MODEL (default Qwen/Qwen2.5-0.5B-Instruct, weights from the local
# Hugging Face cache or a folder) through the plugin, and a synthetic GPU-served model, each printing
# TTFT, TPOT and energy, then the suite's throughput against `vllm bench serve` at the same concurrency
# (part 3, issue 41). Reports and the log land in $OUT (default /tmp/slam-gpu-check).
# vLLM's wheel (336 MB) and its CUDA torch are too big to carry (64 MiB a call), so on a box with no
# registry the vLLM part says why it was skipped and the synthetic part still runs.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
OUT=${OUT:-/tmp/slam-gpu-check}
mkdir -p "$OUT"

if [ "${1:-}" = "prepare" ]; then
  grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
  for wheel in $("$PY" bench/gpu_vllm_check.py --closure); do
    "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
      -d .whl "$wheel" || echo "prepare: no py3.12 wheel for $wheel"
  done
  ls -1 .whl
  exit 0
fi

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || echo "nvidia-smi: none"
if ls .whl/*.whl >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/slam-site .whl/*.whl && export PYTHONPATH=/tmp/slam-site${PYTHONPATH:+:$PYTHONPATH}
fi
if ! "$PY" -c "import vllm" 2>/dev/null && ! command -v vllm >/dev/null; then
  "$PY" -m venv --system-site-packages /tmp/slam-vllm && VPY=/tmp/slam-vllm/bin/python
  if ls .whl/vllm-*.whl >/dev/null 2>&1; then
    "$VPY" -m pip install -q --no-index --find-links .whl vllm && PY=$VPY
  elif timeout 900 "$VPY" -m pip install -q --retries 0 --timeout 15 vllm; then
    PY=$VPY
  else
    echo "vllm: could not be installed here (no registry, or no wheel for this machine)"
  fi
fi
"$PY" bench/gpu_vllm_check.py "$@" 2>&1 | tee "$OUT/gpu_vllm_check.log"
