#!/usr/bin/env bash
# Every CLI command once on a real GPU, as a user would run them (read-only: no clock
# locks or power limits; ncu with --clock-control none). Writes logs under $1.
# Usage on the GPU machine: PYTHONPATH=src bash benchmarks/gpu_cli_smoke.sh $OUT
set -u
out=${1:?output folder}
mkdir -p "$out"
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
pm() { python3 -m powermodels.cli "$@"; }
step() { echo; echo "\$ powermodels $*"; local t0=$SECONDS; pm "$@"; echo "[exit $? after $((SECONDS - t0)) s]"; }
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,power.limit,temperature.gpu --format=csv
  step demo
  step measure --kernel fp32 --protocol naive
  step measure --kernel fp32 --protocol good_practice --out "$out/measure_gp.parquet"
  step measure --kernel sgemm --protocol continuous
  cat > "$out/campaign.json" <<JSON
{"device": "auto", "kernels": {"fp32": [{"nr_inner": 256}, {"nr_inner": 1024}], "stream_triad": [{}]},
 "protocol": "continuous", "repeats": 2}
JSON
  step campaign "$out/campaign.json" --out "$out/campaign" --no-progress
  step characterize --device nvml --seconds 2 --step-seconds 2 --out "$out/characterize"
  step attribute --fit datasets/h200/wattchmen_microbench.parquet --top 8 \
       --ncu python3 -c "import cupy as cp; a=cp.random.rand(2048,2048,dtype=cp.float32); (a@a).sum().item()"
  nvidia-smi --query-gpu=name,clocks.sm,power.limit --format=csv
} 2>&1 | tee "$out/cli_smoke.log"
