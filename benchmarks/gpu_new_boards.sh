#!/bin/bash
# Record on every GPU of a lent machine that was never recorded before, one process per board, a tar per board.
#
# Usage (on the device machine, from the repository root; known_uuids.txt written here first with
# `python benchmarks/known_boards.py --write known_uuids.txt`, untracked, so the call carries it):
#
#     bash benchmarks/gpu_new_boards.sh NAME TIMEOUT_S [gpu_raw_recording.py options...]
#     bash benchmarks/gpu_new_boards.sh raw_recording 545 --lead-idle 45 --probe-pressure
#     bash benchmarks/gpu_new_boards.sh capstarts_rests15 420 --parts capstarts --cap-starts 14 --cap-idle 15 \
#         --cap-series 10 --lead-idle 20
#
# Exits 3 before any load when no board is new (known_boards.py --check). Each new board records into a fresh
# scratch folder (mktemp -d), as NAME_<uuid8>, under `timeout TIMEOUT_S`, all boards at once (CUDA_VISIBLE_DEVICES=index); each process's
# output goes to the folder's rec_log.txt; then $OUT/NAME_<uuid8>.tar.gz, one file per board (the device tool
# returns at most 8). Changes no GPU setting (the recorder blocks NVML's setters).
set -u
name=$1; timeout_s=$2; shift 2
work=$(mktemp -d)
python3 benchmarks/known_boards.py --check known_uuids.txt > "$work/known_boards.txt"; status=$?
cat "$work/known_boards.txt"
[ "$status" = 0 ] || exit 3
new=$(tail -n 1 "$work/known_boards.txt" | sed 's/^new: *//')
export PYTHONPATH=src
for g in $new; do
  uuid8=$(nvidia-smi -i "$g" --query-gpu=uuid --format=csv,noheader | cut -c5-12)
  folder=$work/${name}_${uuid8}
  log=$work/log_${name}_${uuid8}.txt
  (CUDA_VISIBLE_DEVICES=$g timeout "$timeout_s" python3 benchmarks/gpu_raw_recording.py "$@" --out "$folder" \
     > "$log" 2>&1
   echo "rc=$?" >> "$log"
   mkdir -p "$folder" && mv "$log" "$folder/rec_log.txt") &
done
wait
(cd "$work" && for d in ${name}_*; do [ -d "$d" ] && tar czf "$OUT/$d.tar.gz" "$d"; done)
ls -la "$OUT"
for f in "$work"/${name}_*/rec_log.txt; do echo "== $f"; tail -n 3 "$f"; done
nvidia-smi --query-gpu=index,uuid,serial,name,temperature.gpu --format=csv
