#!/usr/bin/env bash
# The report-size trio (configs/report/trio/: sinusoidal, learnable and RoPE at 6+6 layers, d_model 512,
# bf16) on one GPU machine, in priority order, each step writing what it finished into the output
# folder before the next starts (issue 57):
#   0. the packages the machine lacks, from the wheels sent along (benchmarks/gpu_wheels.sh install),
#      and what the machine is                                              -> device.txt
#   1. make test-gpu: the tests that need CUDA and those a GPU changes         -> test_gpu.log
#   2. the trio's runs its sequential plan wants (tools/study_plan.py: the seeds of the next look, for
#      the comparisons still open), in waves of whole seeds, at most N runs side by side on the GPU
#      (sweep.py --launcher local); after each wave the finished runs are archived (tools/archive.py
#      pack), the family recomputed (compare.py) and the plan asked again, until it stops or the time
#      runs out                                                             -> trio_runs.tar.xz
#   3. the README's "(needs a GPU)" commands, if time is left (tools/readme_check.py --gpu)
# A wave that would not finish in the time left is not started; a run cut short is not archived (the
# next command runs it again: the same command, with the archive brought back into results/, resumes
# with what the plan still wants). The steps log is steps.log, the sweeps' sweep.log.
#
#   tools/gpu_study.sh [SECONDS [N]]   SECONDS: the time this command may take in all [540: a 600 s
#                                      limit per command, less the set-up and copying back];
#                                      N: runs side by side on the GPU [6]
#   tools/gpu_study.sh --help
#
# Before, on the machine with the git checkout (the GPU machine's copy need not have .git; docs/GPU.md):
#   python tools/code_snapshot.py     # .code_snapshot.json: the commit the runs record (a clean tree: exit 0)
#   benchmarks/gpu_wheels.sh          # .whl/: the packages, for a GPU machine without network
# then send the checkout with .whl/ and .code_snapshot.json, run this there, and bring the output
# folder back (docs/GPU.md, "Back on the machine with the checkout").
#
# Environment (defaults in brackets):
#   GPU_STUDY_OUT           the output folder [/tmp/gpu_study_out]
#   GPU_STUDY_WAVE_SECONDS  the time one wave of N report-size runs takes, trained and tested [270:
#                           an estimate; set it from the waves' times in steps.log]
#   GPU_STUDY_SKIP_TESTS=1  leave out steps 1 and 3
#   GPU_STUDY_NO_WHEELS=1   do not install the wheels (a dry run on another Python)
#   GPU_STUDY_EXTRA         more sweep.py flags; a dry run on a CPU: "--gpus_per_run 0
#                           --set training.device=cpu ..." (tests/helpers.py: tiny_overrides)
#   GPU_WHEELS_DIR          the wheel folder [.whl]
#   PYTHON                  the python that runs everything [python3]
set -uo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in -h | --help) sed -n '2,/^set /{/^set /d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;; esac
START=$(date +%s) BUDGET=${1:-540} N=${2:-6}
if ! [[ "$BUDGET $N" =~ ^[0-9]+\ [1-9][0-9]*$ ]]; then
  echo "error: usage: tools/gpu_study.sh [SECONDS [N]], whole numbers, N at least 1 (--help)" >&2; exit 2
fi
OUTDIR=${GPU_STUDY_OUT:-/tmp/gpu_study_out}
PY=${PYTHON:-python3}
EXTRA=(${GPU_STUDY_EXTRA:-})
STUDY=report/trio
WAVE_SECONDS=${GPU_STUDY_WAVE_SECONDS:-270}
mkdir -p "$OUTDIR"
left() { echo $((BUDGET - ($(date +%s) - START))); }
say() { echo "$(date -u +%T) $*" | tee -a "$OUTDIR/steps.log"; }

# 0. packages and machine
if [ -d "${GPU_WHEELS_DIR:-.whl}" ] && [ -z "${GPU_STUDY_NO_WHEELS:-}" ]; then
  site=$(PYTHON=$PY benchmarks/gpu_wheels.sh install) && export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH} ||
    { say "wheels failed to install"; exit 1; }
fi
{ nvidia-smi || true; $PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda,
  torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no CUDA')"; } >"$OUTDIR/device.txt" 2>&1
if [ ! -x .venv/bin/python ]; then  # make's targets run .venv/bin/python: here, the machine's own (CUDA torch)
  mkdir -p .venv/bin && ln -sf "$(command -v "$PY")" .venv/bin/python && touch .venv/.installed
fi
[ -f .code_snapshot.json ] || say "no .code_snapshot.json: the runs will record no commit (python tools/code_snapshot.py in the git checkout first)"
say "step 0 done: $(tail -1 "$OUTDIR/device.txt")"

# 1. the GPU tests
tests_limit=$(($(left) - WAVE_SECONDS - 30))  # the time left for them, one wave kept for step 2
if [ -z "${GPU_STUDY_SKIP_TESTS:-}" ] && [ "$tests_limit" -lt 30 ]; then
  say "step 1 left out: $tests_limit s for make test-gpu once a wave ($WAVE_SECONDS s) is kept (SECONDS too small)"
elif [ -z "${GPU_STUDY_SKIP_TESTS:-}" ]; then
  timeout "$tests_limit" make -s test-gpu PYTHON="$PY" >"$OUTDIR/test_gpu.log" 2>&1
  say "step 1 done: make test-gpu exit $? ($(tail -1 "$OUTDIR/test_gpu.log"))"
fi

# 2. the trio, wave by wave, as its plan wants (the runs of earlier commands are in results/ already)
RESULTS=/tmp/gpu_study_archive/results
COMMIT=$($PY -c "import json; print(json.load(open('.code_snapshot.json'))['commit'])" 2>/dev/null || echo no-snapshot-commit)
rm -rf /tmp/gpu_study_archive && mkdir -p "$RESULTS/$STUDY"
[ -d "results/$STUDY" ] && cp -r "results/$STUDY/." "$RESULTS/$STUDY/"
archive() {  # the runs finished so far, the family recomputed with them (the plan reads it), packed
  $PY tools/archive.py pack "runs/$STUDY" --results "$RESULTS" >>"$OUTDIR/sweep.log" 2>&1
  $PY compare.py "$RESULTS/$STUDY/*" --family "configs/$STUDY/findings/headline.yaml" \
    --output "$RESULTS/$STUDY/summary" --overwrite >>"$OUTDIR/sweep.log" 2>&1
  tar -C /tmp/gpu_study_archive -cJf "$OUTDIR/trio_runs.tar.xz" results
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
      --runs_per_gpu 1 "${EXTRA[@]}" >>"$OUTDIR/sweep.log" 2>&1 &
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
  timeout $(($(left) - 10)) $PY tools/readme_check.py --gpu >"$OUTDIR/readme_gpu.log" 2>&1
  say "step 3 done: readme_check --gpu exit $?"
fi
say "done, $(left) s of $BUDGET left"
