#!/usr/bin/env bash
# Retrain the headline configurations of the demo and the length study at seeds 1234, 1, 2, 3, 4
# (issue 43: every seed of a configuration on today's code), side by side on one GPU, one sweep
# process per run, PARALLEL at a time; then copy every finished run into results/ (`make archive`)
# and pack those folders into $OUT/headline.tar.xz.part-* (split below 16 MB).
#
#   OUT=/tmp/out PARALLEL=16 LIMIT=470 tools/headline_seeds_gpu.sh
#
# Runs are ordered configuration by configuration, so a stop at LIMIT seconds leaves whole
# configurations done; what did not finish is run again later by the same sweep commands
# (README: the study's command), which skip every run that has test/scores.json.
set -u
PY=${PY:-python3}
PARALLEL=${PARALLEL:-16}
LIMIT=${LIMIT:-470}
OUT=${OUT:-/tmp/headline_out}
EXTRA=${EXTRA:-}  # more sweep flags, e.g. for a smoke test: EXTRA="--set training.max_steps=3"
mkdir -p "$OUT"
# The length study's headline set: one encoding per family, plus training on joined pairs
LENGTH="sinusoidal rope alibi learnable t5_bias sinusoidal_concat"
DEMO="sinusoidal learnable rope"
VARIANTS="--variant linear4 model.positional.scaling=linear model.positional.scaling_factor=4
 --variant ntk4 model.positional.scaling=ntk model.positional.scaling_factor=4
 --variant yarn4 model.positional.scaling=yarn model.positional.scaling_factor=4"

jobs=$OUT/jobs.txt
: >"$jobs"
if [ -n "${JOBS:-}" ]; then  # an explicit list instead, "CONFIG SEED;CONFIG SEED;..." (what an earlier call left)
  echo "$JOBS" | tr ';' '\n' | sed '/^ *$/d' >"$jobs"
  DEMO_ONLY=" " LENGTH_ONLY=" "
fi
for name in ${DEMO_ONLY:-$DEMO}; do
  for seed in ${SEEDS:-1234 1 2 3 4}; do echo "configs/demo/$name.yaml $seed" >>"$jobs"; done
done
for name in ${LENGTH_ONLY:-$LENGTH}; do
  for seed in ${SEEDS:-1234 1 2 3 4}; do echo "configs/length/$name.yaml $seed" >>"$jobs"; done
done

run_one() {  # config seed: seed 1234 is the configs' own seed, into the run folder without a suffix
  local config=$1 seed=$2 seeds=() variants=() start=$SECONDS
  [ "$seed" = 1234 ] || seeds=(--seeds "$seed")
  case $config in configs/length/*) read -r -a variants <<<"$(echo $VARIANTS)";; esac
  $PY sweep.py "$config" "${seeds[@]}" "${variants[@]}" --set training.num_threads=1 $EXTRA \
    >"$OUT/logs/$(basename "$config" .yaml)_$seed.log" 2>&1
  echo "$(date +%T) rc=$? $((SECONDS - start))s $config seed $seed"
}
export -f run_one
export PY OUT VARIANTS EXTRA
mkdir -p "$OUT/logs"
echo "$(date +%T) start: $(wc -l <"$jobs") runs, $PARALLEL at a time, stop at ${LIMIT}s"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
timeout --signal=TERM --kill-after=10 "$LIMIT" \
  xargs -P "$PARALLEL" -L 1 bash -c 'run_one "$0" "$1"' <"$jobs" | tee "$OUT/progress.txt"
echo "$(date +%T) sweeps ended"
make archive 2>&1 | grep archived | tee "$OUT/archived.txt"
folders=$(sed -n 's/.* -> //p' "$OUT/archived.txt")
if [ -n "$folders" ]; then  # xz where there is one (a third the size of gzip on these text files)
  if command -v xz >/dev/null; then tar cf - $folders | xz -T0 -6 | split -b 15M - "$OUT/headline.tar.xz.part-"
  else tar czf - $folders | split -b 15M - "$OUT/headline.tgz.part-"; fi
fi
(cd "$OUT" && tar czf logs.tgz logs && rm -rf logs jobs.txt)
ls -la "$OUT"
