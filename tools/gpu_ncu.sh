#!/usr/bin/env bash
# Nsight Compute on the fused MXINT8 linear (issue 23): one report per (shape, batch, config) under $OUT/ncu.
#   LABKIT_COMMIT=... NCU_CASES="14336x4096;16;<json>|cublas|picked ..." bash tools/gpu_ncu.sh
# NCU_EXTRA: more ncu arguments (e.g. --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio)
set -uo pipefail
source "$(dirname "$0")/gpu_env.sh"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
[[ -n "$NCU" ]] || { echo "no ncu on this machine"; exit 3; }
"$NCU" --version | tail -1
mkdir -p "$OUT/ncu"
i=0
while IFS= read -r case; do
  [[ -z "$case" ]] && continue
  shape=${case%%;*}; rest=${case#*;}; batch=${rest%%;*}; cfg=${rest#*;}
  i=$((i + 1))
  names="regex:_dq_kernel|_tma_kernel|_gemv_kernel|_dot_kernel"
  [[ $cfg == cublas ]] && names="regex:nvjet|gemm|gemv|xmma|cutlass"
  timeout 120 "$NCU" -k "$names" --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
    --section WarpStateStats --section SchedulerStats ${NCU_EXTRA:-} \
    python3 benchmarks/fused_linear_one.py --shape "$shape" --batch "$batch" --config "$cfg" \
    >"$OUT/ncu/case$i.txt" 2>&1
  echo "== case $i: $shape batch $batch $cfg (rc=$?)"
  grep -E "^  [a-zA-Z_]|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Block Limit|L2 Cache Throughput|L1/TEX Cache Throughput|Compute \(SM\) Throughput|Stall|Warp Cycles Per Issued|Issued Warp|No Eligible|Waves Per SM|Grid Size|Dynamic Shared|Theoretical Occ" "$OUT/ncu/case$i.txt" | head -30
  grep -E "stalled" "$OUT/ncu/case$i.txt" | sort -k3 -g -r | head -12
done <<<"$(echo "$NCU_CASES" | tr '|' '\n')"
