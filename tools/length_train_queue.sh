#!/usr/bin/env bash
# Train the length study's runs (training only) from one fixed commit, several workers side by
# side on one machine, so that every run of the study trains on the same code while development
# goes on. `make length` (sweep.py) then skips the finished trainings, tests every run and writes
# the tables. Resumable: run it again after a stop (finished runs are skipped, interrupted ones
# resumed from their last checkpoint).
#
#   tools/length_train_queue.sh COMMIT WORKER WORKERS [single|concat]
#   e.g. on 2 cores:  for w in 0 1; do tools/length_train_queue.sh 1fb850f $w 2 single & done
#
# The code is checked out once into ../study-<commit> (a git worktree sharing .venv and data/cache);
# the configs are this checkout's, and the run folders go to runs/length/<config>[_seed<N>] of this
# checkout, as `make length` expects.
set -euo pipefail
commit=$1 worker=$2 workers=$3 arm=${4:-single}
here=$(cd "$(dirname "$0")/.." && pwd)
tree="$here/../study-$commit"
if mkdir "$tree.setup" 2>/dev/null; then  # the first worker sets the tree up; the others wait for it
  if [ ! -d "$tree" ]; then
    git -C "$here" worktree add --detach "$tree" "$commit"
    ln -s "$here/.venv" "$tree/.venv"
    mkdir -p "$here/data/cache" && rm -rf "$tree/data/cache" && ln -s "$here/data/cache" "$tree/data/cache"
  fi
  touch "$tree.setup/done"
fi
while [ ! -e "$tree.setup/done" ]; do sleep 2; done
names="sinusoidal rope alibi learnable t5_bias shaw none shape xpos kerple fire cape rope_randomized"
[ "$arm" = concat ] && names="sinusoidal rope alibi learnable t5_bias shaw none shape xpos kerple fire cape" suffix=_concat
i=0
for seed in default 1 2; do
  for name in $names; do
    config="$name${suffix:-}"
    i=$((i + 1)); [ $((i % workers)) -eq "$worker" ] || continue
    if [ "$seed" = default ]; then dir="$here/runs/length/$config"; sets=(--set "run_dir=$dir")
    else dir="$here/runs/length/${config}_seed$seed"; sets=(--set "seed=$seed" --set "run_dir=$dir"); fi
    if grep -q '"event": "end"' "$dir/metrics.jsonl" 2>/dev/null; then echo "finished already: $dir"; continue; fi
    resume=(); ls "$dir"/checkpoints/last_*.pt >/dev/null 2>&1 && resume=(--resume)
    echo "$(date +%H:%M) worker $worker: $config seed=$seed -> $dir ${resume[*]}"
    (cd "$tree" && .venv/bin/python train.py --config "$here/configs/length/$config.yaml" "${sets[@]}" \
       --set training.num_threads=1 "${resume[@]}" > "/tmp/length_queue_$worker.log" 2>&1) \
      || { echo "FAILED $dir (see /tmp/length_queue_$worker.log)"; tail -2 "/tmp/length_queue_$worker.log"; }
  done
done
echo "worker $worker done"
