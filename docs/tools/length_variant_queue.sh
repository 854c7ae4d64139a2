#!/usr/bin/env bash
# Test the length study's RoPE runs stretched at inference (the variants `make length` passes to
# sweep.py: linear4, ntk4, yarn4) as their plain tests finish, from the same fixed commit as
# docs/tools/length_test_queue.sh, through sweep.py's own `score_variants` (so <run>/test_<name>/
# is what `make length` would write, and `make length` afterwards skips it). A run whose encoding
# does not take the scaling keys is skipped. Resumable; it ends once every scored run is done.
#
#   docs/tools/length_variant_queue.sh COMMIT
#   e.g.  setsid nohup docs/tools/length_variant_queue.sh 2c09493 > runs/length/variants.log 2>&1 &
set -uo pipefail
commit=$1
here=$(cd "$(dirname "$0")/../.." && pwd)
tree="$here/../study-test-$commit"
[ -d "$tree" ] || { echo "no worktree $tree: start docs/tools/length_test_queue.sh $commit first"; exit 2; }
cd "$tree" || exit 2
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
while true; do
  pending=0
  for dir in "$here"/runs/length/*/; do
    dir=${dir%/}
    [ -f "$dir/config.yaml" ] || continue
    grep -q "name: rope" "$dir/config.yaml" || continue  # the scalings are RoPE's keys
    [ -f "$dir/test/scores.json" ] || { pending=1; continue; }
    .venv/bin/python - "$dir" <<'PY' || echo "FAILED variants of $dir"
import sys
from pathlib import Path
from commands.sweep_job import score_variants
variants = [(f"{s}4", [f"model.positional.scaling={s}", "model.positional.scaling_factor=4"])
            for s in ("linear", "ntk", "yarn")]
sys.exit(score_variants(Path(sys.argv[1]), variants, []))
PY
  done
  [ "$pending" = 0 ] && { echo "$(date +%H:%M) every scored RoPE run has its variants"; break; }
  sleep 60
done
