#!/usr/bin/env bash
# Test the length study's RoPE runs stretched at inference (the variants `make length` passes to
# sweep.py: linear4, ntk4, yarn4) as their plain tests finish, from the same fixed commit as
# tools/length_test_queue.sh, through sweep.py's own `score_variants` (so <run>/test_<name>/
# is what `make length` would write, and `make length` afterwards skips it). RoPE runs with
# randomized positions take no scaling and are left out, as `make length` leaves them. Resumable;
# it ends once every RoPE run folder it sees (at least EXPECTED, default 9: rope, rope_concat and
# rope_randomized x 3 seeds) is scored with its variants, or failed once (named at the end).
#
#   tools/length_variant_queue.sh COMMIT [EXPECTED]
#   e.g.  setsid nohup tools/length_variant_queue.sh 2c09493 > runs/length/variants.log 2>&1 &
set -uo pipefail
commit=$1 expected=${2:-9}
here=$(cd "$(dirname "$0")/.." && pwd)
tree="$here/../study-test-$commit"
[ -d "$tree" ] || { echo "no worktree $tree: start tools/length_test_queue.sh $commit first"; exit 2; }
cd "$tree" || exit 2
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
declare -A failed  # variants that failed once in this invocation: not again (the log above says why)
while true; do
  pending=0 runs=0
  for dir in "$here"/runs/length/*/; do
    dir=${dir%/}
    [ -f "$dir/config.yaml" ] || continue
    grep -qE '^ +name: rope$' "$dir/config.yaml" || continue  # the scalings are RoPE's keys
    runs=$((runs + 1))
    grep -qE '^ +randomized: true$' "$dir/config.yaml" && continue  # refused with randomized positions
    missing=0
    for v in linear4 ntk4 yarn4; do [ -f "$dir/test_$v/scores.json" ] || missing=1; done
    [ "$missing" = 0 ] || [ -n "${failed[$dir]:-}" ] && continue
    [ -f "$dir/test/scores.json" ] || { pending=1; continue; }  # its plain test first
    .venv/bin/python - "$dir" <<'PY' || { echo "FAILED variants of $dir"; failed[$dir]=1; }
import sys
from pathlib import Path
from commands.sweep_job import score_variants
from commands.sweep_plan import check_variants
variants = check_variants([[f"{s}4", f"model.positional.scaling={s}", "model.positional.scaling_factor=4"]
                           for s in ("linear", "ntk", "yarn")])
sys.exit(score_variants(Path(sys.argv[1]), variants, []))
PY
    pending=1
  done
  if [ "$pending" = 0 ] && [ "$runs" -ge "$expected" ]; then
    echo "$(date +%H:%M) every RoPE run has its variants${failed[*]:+; failed: ${!failed[*]}}"
    break
  fi
  sleep 60
done
