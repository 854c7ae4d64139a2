#!/usr/bin/env bash
# The README's GPU figures (issue 56) in two commands for a GPU machine, each inside one command's time
# limit (GPU_CHECK_SECONDS), in priority order; every step writes its results before the next starts:
#
#   benchmarks/gpu_check.sh decode   # the GPU tests; decoding.cuda_graphs against the eager step on a
#                                    # trained model's test lines; test-set beam 5, 3 rounds:
#                                    # graphed, eager, Marian generate()
#   benchmarks/gpu_check.sh train    # the 32k-token step's ceiling (GEMM shapes and attention); training
#                                    # at 32k tokens, 3 rounds, profiled: graphed, Marian, eager; then
#                                    # packed rows (training.pack_length) against eager, one round
#   benchmarks/gpu_check.sh PART --limits   # each step's time limit under these settings, nothing run
#   benchmarks/gpu_check.sh --help
#
# Before, on a machine with network: the wheels the GPU machine lacks (benchmarks/gpu_wheels.sh, into
# .whl/; installed here from that folder alone) and a trained demo model's export in
# exported/demo_sinusoidal (python export.py --run runs/demo/sinusoidal --output exported/demo_sinusoidal;
# ~8 MB), both sent with the checkout (docs/GPU.md). Each step runs under its own time limit, its share
# of GPU_CHECK_SECONDS less GPU_CHECK_RESERVE (the set-up and copying the results back), plus 10 s to
# kill one that runs over; a benchmark stopped by its limit still writes what its finished cases
# measured, and every step that did not end cleanly is named at the end (exit 1). Cases of a benchmark
# run in fresh processes, order alternating by round; Inductor's on-disk caches are shared by the
# rounds, so a compilation is paid once.
#
# Environment (defaults in brackets):
#   GPU_CHECK_SECONDS  the time one command may take in all [600]; the default shares give the steps
#                      100, 110 and 300 s (decode), 61, 387 and 61 s (train)
#   GPU_CHECK_RESERVE  seconds of it kept for the set-up and copying back [60]
#   GPU_CHECK_OUT      the results and the log [benchmarks/results/gpu]
#   MODEL              the export decoded [exported/demo_sinusoidal]
#   DRY_RUN=1          the same steps on this machine's CPU at tiny sizes (the wiring, before a GPU's time
#                      is spent; the graph-equality step runs whole)
#   PYTHON             the python of a dry run [python3; on the GPU, python3]
#   GPU_WHEELS_DIR     the wheels sent along, installed first if there [.whl] (benchmarks/gpu_wheels.sh)
set -uo pipefail
part=${1:-}
case "$part" in -h | --help) sed -n '2,/^set /{/^set /d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;; esac
if [[ ! "$part" =~ ^(decode|train)$ ]] || [[ ! "${2:-}" =~ ^(|--limits)$ ]] || [ $# -gt 2 ]; then
  echo "error: usage: benchmarks/gpu_check.sh decode|train [--limits] (--help: what each part does)" >&2; exit 2
fi
total=${GPU_CHECK_SECONDS:-600} reserve=${GPU_CHECK_RESERVE:-60}
if ! [[ "$total$reserve" =~ ^[0-9]+$ ]]; then
  echo "error: GPU_CHECK_SECONDS ($total) and GPU_CHECK_RESERVE ($reserve) are whole seconds" >&2; exit 2
fi
out=${GPU_CHECK_OUT:-benchmarks/results/gpu}
model=${MODEL:-exported/demo_sinusoidal}
dev=cuda decode_size=(--sentences 2000 --max_tokens 30000) train_size=(--max_tokens 32000 --steps 20)
ceiling_size=(--tokens 32000) python=python3
if [ "${DRY_RUN:-0}" = 1 ]; then
  dev=cpu decode_size=(--size tiny --sentences 16 --out_len 6 --max_tokens 300) ceiling_size=(--size tiny --tokens 256)
  train_size=(--size tiny --max_tokens 300 --steps 2) python=${PYTHON:-python3}
fi
failed=() shares=() mode=collect
limit() {  # a step's share of the command's time, less the reserve and each step's 10 s to be killed
  local sum=0 s
  for s in "${shares[@]}"; do sum=$((sum + s)); done
  echo $(($1 * (total - reserve - 10 * ${#shares[@]}) / sum))
}
step() {  # step SHARE NAME COMMAND...: run it under its time limit, remember it if it did not end cleanly
  local share=$1 name=$2 rc seconds
  shift 2
  case $mode in
  collect) shares+=("$share"); return ;;
  list) echo "$name $(limit "$share")"; return ;;
  esac
  seconds=$(limit "$share")
  timeout -k 10 "$seconds" "$@"
  rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "STEP $name ended with exit code $rc$([ "$rc" -eq 124 ] && echo " (its ${seconds} s limit)")"
    failed+=("$name")
  fi
}
decode() {
  step 100 gpu_tests $python -m pytest -q -p no:cacheprovider -m gpu tests/decoding/test_fixed_shape.py \
    tests/training/test_cuda.py
  step 110 graph_equality $python benchmarks/search_equality.py --contender cuda_graphs --device $dev "$model" \
    --output "$out/graph_equality_$dev.json"
  step 300 decode $python benchmarks/decode.py --device $dev "${decode_size[@]}" --repeats 1 --rounds 3 \
    --cases ours_beam5_graphed ours_beam5_cached hf_beam5 --profile "$out/profile" \
    --output "$out/decode_${dev}_testset.json"
}
train() {
  step 60 ceiling $python benchmarks/ceiling.py --device $dev "${ceiling_size[@]}" --output "$out/ceiling_$dev.json"
  step 380 train_32k $python benchmarks/train.py --device $dev --precision bf16 "${train_size[@]}" --rounds 3 \
    --cases ours_sinusoidal_cudagraphs hf_marian ours_sinusoidal --profile "$out/profile" \
    --output "$out/train_${dev}_32k.json"
  step 60 train_packed $python benchmarks/train.py --device $dev --precision bf16 "${train_size[@]}" \
    --cases ours_sinusoidal_packed ours_sinusoidal --output "$out/train_${dev}_32k_packed.json"
}
"$part"  # its steps' shares
for share in "${shares[@]}"; do
  if [ "$(limit "$share")" -lt 30 ]; then
    echo "error: GPU_CHECK_SECONDS=$total less GPU_CHECK_RESERVE=$reserve leaves a step of the $part part under 30 s (raise GPU_CHECK_SECONDS)" >&2
    exit 2
  fi
done
if [ "${2:-}" = --limits ]; then mode=list; "$part"; exit 0; fi
mode=run
mkdir -p "$out"
if [ -d "${GPU_WHEELS_DIR:-.whl}" ] && [ "${DRY_RUN:-0}" != 1 ]; then  # the packages the machine lacks, sent as wheels
  site=$(PYTHON=$python benchmarks/gpu_wheels.sh install) && export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false TORCH_LOGS=recompiles,perf_hints
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_cache TORCHINDUCTOR_FX_GRAPH_CACHE=1 TORCHINDUCTOR_AUTOGRAD_CACHE=1
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null || echo "no nvidia-smi"
  $python -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name() if torch.cuda.is_available() else 'cpu')"
  "$part"
  [ ${#failed[@]} -eq 0 ] && echo "every step ended cleanly" || echo "steps that did not end cleanly: ${failed[*]}"
  [ ${#failed[@]} -eq 0 ]
} 2>&1 | tee "$out/gpu_check_$part.log"
