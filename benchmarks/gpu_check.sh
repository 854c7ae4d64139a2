#!/usr/bin/env bash
# The README's GPU figures (issue 56) in two commands for a lent GPU machine, each inside its 600 s,
# in priority order; every step writes its results before the next starts:
#
#   benchmarks/gpu_check.sh decode   # the GPU tests; decoding.cuda_graphs against the eager step on a
#                                    # trained model's test lines; test-set beam 5, 3 rounds:
#                                    # graphed, eager, Marian generate()
#   benchmarks/gpu_check.sh train    # the 32k-token step's ceiling (GEMM shapes and attention); training
#                                    # at 32k tokens, 3 rounds, profiled: graphed, Marian, eager; then
#                                    # packed rows (training.pack_length) against eager, one round
#
# Before: benchmarks/gpu_wheels.sh (the packages that machine lacks, into .whl/) and a trained demo
# model's export in exported/demo_sinusoidal (python export.py --run runs/demo/sinusoidal --output
# exported/demo_sinusoidal; ~8 MB); carry both: `run(command="benchmarks/gpu_check.sh decode",
# carry=[".whl", "exported"])`. Each step runs under its own time limit (plus 10 s to kill one that
# runs over; together at most 550 s per part); a benchmark stopped by its limit still writes what
# its finished cases measured, and every step that did not end cleanly is named at the end (exit 1).
# Cases of a benchmark run in fresh processes, order alternating by round; Inductor's on-disk
# caches are shared by the rounds, so a compilation is paid once. Results and the log go to $OUT
# (default benchmarks/results/gpu/). DRY_RUN=1: the same steps on this machine's CPU at tiny sizes
# (the wiring, before a lent machine's minutes are spent; the graph-equality step runs whole).
set -uo pipefail
part=${1:-}
case "$part" in decode | train) ;; *) echo "usage: benchmarks/gpu_check.sh decode|train" >&2; exit 2 ;; esac
out=${OUT:-benchmarks/results/gpu}
mkdir -p "$out"
if [ -d .whl ] && [ "${DRY_RUN:-0}" != 1 ]; then  # packages the machine lacks, carried as wheels
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site
fi
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false TORCH_LOGS=recompiles,perf_hints
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_cache TORCHINDUCTOR_FX_GRAPH_CACHE=1 TORCHINDUCTOR_AUTOGRAD_CACHE=1
model=${MODEL:-exported/demo_sinusoidal}
dev=cuda decode_size=(--sentences 2000 --max_tokens 30000) train_size=(--max_tokens 32000 --steps 20)
ceiling_size=(--tokens 32000) python=python3
if [ "${DRY_RUN:-0}" = 1 ]; then
  dev=cpu decode_size=(--size tiny --sentences 16 --out_len 6 --max_tokens 300) ceiling_size=(--size tiny --tokens 256)
  train_size=(--size tiny --max_tokens 300 --steps 2) python=${PYTHON:-python3}
fi
failed=()
step() {  # step SECONDS NAME COMMAND...: run it under a time limit, remember it if it did not end cleanly
  local limit=$1 name=$2 rc
  shift 2
  timeout -k 10 "$limit" "$@"
  rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "STEP $name ended with exit code $rc$([ "$rc" -eq 124 ] && echo " (its ${limit} s limit)")"
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
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null || echo "no nvidia-smi"
  $python -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name() if torch.cuda.is_available() else 'cpu')"
  "$part"
  [ ${#failed[@]} -eq 0 ] && echo "every step ended cleanly" || echo "steps that did not end cleanly: ${failed[*]}"
  [ ${#failed[@]} -eq 0 ]
} 2>&1 | tee "$out/gpu_check_$part.log"
