#!/usr/bin/env bash
# Test the length study's runs as their trainings finish (tools/length_train_queue.sh trains
# them), from one fixed commit, so that every score of the study comes from the same evaluation
# code: `python test.py --run runs/length/<run> --overwrite`, what `make length` runs for each run.
# Resumable: run it again after a stop (a scored run is skipped; one whose test was cut short is
# tested again). It ends once every run folder it sees is trained and scored and there are at least
# EXPECTED of them (default 75: 13 single-sentence and 12 joined-pair configs x 3 seeds).
#
#   tools/length_test_queue.sh COMMIT [EXPECTED]
#   e.g.  setsid nohup tools/length_test_queue.sh 2c09493 > runs/length/tester.log 2>&1 &
#
# `make length` afterwards skips what is trained and scored, tests the RoPE variants and writes
# the tables.
set -uo pipefail
commit=$1 expected=${2:-75}
here=$(cd "$(dirname "$0")/.." && pwd)
tree="$here/../study-test-$commit"
if [ ! -d "$tree" ]; then
  git -C "$here" worktree add --detach "$tree" "$commit"
  ln -s "$here/.venv" "$tree/.venv"
  mkdir -p "$here/data/cache" && rm -rf "$tree/data/cache" && ln -s "$here/data/cache" "$tree/data/cache"
fi
cd "$tree" || exit 2
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
declare -A failed  # tested once in vain by this invocation: not again (its log said why)
while true; do
  pending=0 runs=0
  for dir in "$here"/runs/length/*/; do
    dir=${dir%/}
    [ -f "$dir/metrics.jsonl" ] || continue
    runs=$((runs + 1))
    if ! grep '"event": "end"' "$dir/metrics.jsonl" | tail -1 | grep -q '"finished": true'; then
      pending=1; continue  # still training (or stopped: the training queue resumes it)
    fi
    [ -f "$dir/test/scores.json" ] || [ -n "${failed[$dir]:-}" ] && continue
    echo "$(date +%H:%M) testing $dir"
    .venv/bin/python test.py --run "$dir" --overwrite > /tmp/length_test_queue.log 2>&1 \
      || { echo "FAILED $dir (see /tmp/length_test_queue.log)"; tail -2 /tmp/length_test_queue.log; failed[$dir]=1; }
    pending=1
  done
  [ "$pending" = 0 ] && [ "$runs" -ge "$expected" ] && break
  sleep 60
done
echo "every run tested"
