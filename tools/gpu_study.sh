#!/usr/bin/env bash
# The report-size trio (configs/report/trio/: sinusoidal, learnable and RoPE at 6+6 layers, d_model 512,
# bf16) on one lent GPU machine, in priority order, each step writing what it finished under $OUT before
# the next starts (issue 57):
#   0. the packages the machine lacks, from the carried wheels (.whl/), and what the machine is
#   1. make test-gpu: the tests that need CUDA and those a GPU changes         -> $OUT/test_gpu.log
#   2. the trio's planned seeds in waves (seeds 1234 and 1, then 2 and 3, then 4: whole seeds first),
#      N runs side by side on the GPU (sweep.py --launcher local --runs_per_gpu N); after each wave the
#      finished runs are archived (tools/archive.py pack)                   -> $OUT/trio_runs.tar.xz
#   3. the README's "(needs a GPU)" commands, if time is left (tools/readme_check.py --gpu)
# A wave that would not finish in the time left is not started; a run cut short is not archived (the
# next GPU loan runs it again: the same command resumes with what the archive lacks).
#
# Here, before the call (the GPU machine's copy of the tree has no .git):
#   python tools/code_snapshot.py     # the commit the runs record (a clean tree: exit 0)
#   the wheels: see docs/GPU.md ("The GPU machine")
# Then: run(command="tools/gpu_study.sh 540", carry=[".whl", ".code_snapshot.json"], timeout_s=600)
# Back here: tar -xJf <files_at>/trio_runs.tar.xz -C /tmp/trio && python tools/archive.py pack ... (docs/GPU.md)
#
#   tools/gpu_study.sh SECONDS [N]    SECONDS: the time this command may take in all; N: runs per GPU (6)
# A dry run on a CPU: GPU_STUDY_EXTRA="--gpus_per_run 0 --set training.device=cpu ..." (tiny settings).
set -uo pipefail
cd "$(dirname "$0")/.."
START=$(date +%s) BUDGET=${1:-540} N=${2:-6}
OUT=${OUT:-/tmp/gpu_study_out}
PY=${PYTHON:-python3}
EXTRA=(${GPU_STUDY_EXTRA:-})
CONFIGS=(configs/report/trio/sinusoidal.yaml configs/report/trio/learnable.yaml configs/report/trio/rope.yaml)
WAVES=("1234 1" "2 3" "4")
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
timeout $(($(left) - WAVE_SECONDS - 30)) make -s test-gpu PYTHON="$PY" >"$OUT/test_gpu.log" 2>&1
say "step 1 done: make test-gpu exit $? ($(tail -1 "$OUT/test_gpu.log"))"

# 2. the trio, wave by wave
archive() {
  rm -rf /tmp/gpu_study_archive && mkdir -p /tmp/gpu_study_archive/results
  $PY tools/archive.py pack runs/report/trio --results /tmp/gpu_study_archive/results >>"$OUT/sweep.log" 2>&1 &&
    tar -C /tmp/gpu_study_archive -cJf "$OUT/trio_runs.tar.xz" results
}
for wave in "${WAVES[@]}"; do
  if [ "$(left)" -lt $((WAVE_SECONDS + 20)) ]; then
    say "step 2: wave '$wave' not started ($(left) s left, a wave takes about $WAVE_SECONDS)"
    break
  fi
  say "step 2: wave seeds $wave, $N runs per GPU"
  # shellcheck disable=SC2086
  timeout $(($(left) - 15)) $PY sweep.py "${CONFIGS[@]}" --seeds $wave --launcher local --runs_per_gpu "$N" \
    "${EXTRA[@]}" >>"$OUT/sweep.log" 2>&1
  code=$?
  archive
  say "step 2: wave seeds $wave exit $code; archived: $(ls -d runs/report/trio/*/ 2>/dev/null | wc -l) run folders"
  [ $code -eq 0 ] || break
done

# 3. the README's GPU commands
if [ "$(left)" -gt 60 ]; then
  timeout $(($(left) - 10)) $PY tools/readme_check.py --gpu >"$OUT/readme_gpu.log" 2>&1
  say "step 3 done: readme_check --gpu exit $?"
fi
say "done, $(left) s of $BUDGET left"
