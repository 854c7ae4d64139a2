#!/usr/bin/env bash
# The report-size trio (configs/report/trio/: sinusoidal, learnable and RoPE at 6+6 layers, d_model 512,
# bf16) on one lent GPU machine, in priority order, each step writing what it finished under $OUT before
# the next starts (issue 57):
#   0. the packages the machine lacks, from the carried wheels (.whl/), and what the machine is
#   1. make test-gpu: the tests that need CUDA and those a GPU changes         -> $OUT/test_gpu.log
#   2. the trio's runs its sequential plan wants (tools/study_plan.py: the seeds of the next look, for
#      the comparisons still open), in waves of whole seeds, at most N runs side by side on the GPU
#      (sweep.py --launcher local); after each wave the finished runs are archived (tools/archive.py
#      pack), the family recomputed (compare.py) and the plan asked again, until it stops or the time
#      runs out                                                             -> $OUT/trio_runs.tar.xz
#   3. the README's "(needs a GPU)" commands, if time is left (tools/readme_check.py --gpu)
# A wave that would not finish in the time left is not started; a run cut short is not archived (the
# next GPU loan runs it again: the same command, with the archive brought back, resumes with what the
# plan still wants).
#
# Here, before the call (the GPU machine's copy of the tree has no .git):
#   python tools/code_snapshot.py     # the commit the runs record (a clean tree: exit 0)
#   the wheels: see docs/GPU.md ("The GPU machine")
# Then: run(command="tools/gpu_study.sh 540", carry=[".whl", ".code_snapshot.json"], timeout_s=600)
# Back here: tar -xJf <files_at>/trio_runs.tar.xz -C /tmp/trio && python tools/archive.py pack ... (docs/GPU.md)
#
#   tools/gpu_study.sh SECONDS [N]    SECONDS: the time this command may take in all; N: runs per GPU (6)
# A dry run on a CPU: GPU_STUDY_EXTRA="--gpus_per_run 0 --set training.device=cpu ..." (tiny settings),
# GPU_STUDY_SKIP_TESTS=1 to leave out steps 1 and 3.
set -uo pipefail
cd "$(dirname "$0")/.."
START=$(date +%s) BUDGET=${1:-540} N=${2:-6}
OUT=${OUT:-/tmp/gpu_study_out}
PY=${PYTHON:-python3}
EXTRA=(${GPU_STUDY_EXTRA:-})
STUDY=report/trio
WAVE_SECONDS=${GPU_STUDY_WAVE_SECONDS:-270}  # one wave of N report-size runs, trained and tested
mkdir -p "$OUT"
left() { echo $((BUDGET - ($(date +%s) - START))); }
say() { echo "$(date -u +%T) $*" | tee -a "$OUT/steps.log"; }

# 0. packages and machine
if [ -d .whl ] && [ -z "${GPU_STUDY_NO_WHEELS:-}" ]; then  # (a dry run on another Python: GPU_STUDY_NO_WHEELS=1)
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl &&
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} || { say "wheels failed to install"; exit 1; }
fi
{ nvidia-smi || true; $PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda,
  torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no CUDA')"; } >"$OUT/device.txt" 2>&1
if [ ! -x .venv/bin/python ]; then  # make's targets run .venv/bin/python: here, the machine's own (CUDA torch)
  mkdir -p .venv/bin && ln -sf "$(command -v "$PY")" .venv/bin/python && touch .venv/.installed
fi
[ -f .code_snapshot.json ] || say "no .code_snapshot.json: the runs will record no commit (python tools/code_snapshot.py here first)"
say "step 0 done: $(tail -1 "$OUT/device.txt")"

# 1. the GPU tests
if [ -z "${GPU_STUDY_SKIP_TESTS:-}" ]; then
  timeout $(($(left) - WAVE_SECONDS - 30)) make -s test-gpu PYTHON="$PY" >"$OUT/test_gpu.log" 2>&1
  say "step 1 done: make test-gpu exit $? ($(tail -1 "$OUT/test_gpu.log"))"
fi

# 2. the trio, wave by wave, as its plan wants (the runs of earlier loans are in results/ already)
RESULTS=/tmp/gpu_study_archive/results
COMMIT=$($PY -c "import json; print(json.load(open('.code_snapshot.json'))['commit'])" 2>/dev/null || echo no-snapshot-commit)
rm -rf /tmp/gpu_study_archive && mkdir -p "$RESULTS/$STUDY"
[ -d "results/$STUDY" ] && cp -r "results/$STUDY/." "$RESULTS/$STUDY/"
archive() {  # the runs finished so far, the family recomputed with them (the plan reads it), packed
  $PY tools/archive.py pack "runs/$STUDY" --results "$RESULTS" >>"$OUT/sweep.log" 2>&1
  $PY compare.py "$RESULTS/$STUDY/*" --family "configs/$STUDY/findings/headline.yaml" \
    --output "$RESULTS/$STUDY/summary" --overwrite >>"$OUT/sweep.log" 2>&1
  tar -C /tmp/gpu_study_archive -cJf "$OUT/trio_runs.tar.xz" results
}
while :; do
  # a wave: the plan's next runs, whole seeds, at most N
  wave=$($PY tools/study_plan.py "$STUDY" "$COMMIT" --results "$RESULTS/$STUDY" --at_most "$N") ||
    { say "step 2: the plan failed"; break; }
  [ -n "$wave" ] || { say "step 2: the plan wants no more runs (stopped, or every planned seed in)"; break; }
  if [ "$(left)" -lt $((WAVE_SECONDS + 20)) ]; then
    say "step 2: the next wave not started ($(left) s left, a wave takes about $WAVE_SECONDS)"
    break
  fi
  say "step 2: a wave of $(echo "$wave" | wc -l) runs: $(echo "$wave" | awk '{print $3}' | tr '\n' ' ')"
  # one sweep per run of the wave, side by side, sharing the GPU (a config's own seed: no --seeds,
  # its run folder has no _seed suffix, as the plan names it)
  pids=()
  while read -r config seed run; do
    seeds=(); [ "$run" = "$config" ] || seeds=(--seeds "$seed")
    timeout $(($(left) - 15)) $PY sweep.py "configs/$STUDY/$config.yaml" "${seeds[@]}" --launcher local \
      --runs_per_gpu 1 "${EXTRA[@]}" >>"$OUT/sweep.log" 2>&1 &
    pids+=($!)
  done <<<"$wave"
  code=0
  for pid in "${pids[@]}"; do wait "$pid" || code=$?; done
  before=$(ls "$RESULTS/$STUDY"/*/provenance.json 2>/dev/null | wc -l)
  archive
  archived=$(ls "$RESULTS/$STUDY"/*/provenance.json 2>/dev/null | wc -l)
  say "step 2: wave exit $code; archived: $archived runs"
  [ $code -eq 0 ] && [ "$archived" -gt "$before" ] || break
done

# 3. the README's GPU commands
if [ "$(left)" -gt 60 ] && [ -z "${GPU_STUDY_SKIP_TESTS:-}" ]; then
  timeout $(($(left) - 10)) $PY tools/readme_check.py --gpu >"$OUT/readme_gpu.log" 2>&1
  say "step 3 done: readme_check --gpu exit $?"
fi
say "done, $(left) s of $BUDGET left"
