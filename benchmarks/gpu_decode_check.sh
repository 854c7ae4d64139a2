#!/usr/bin/env bash
# Issue 47's D1 as far as it is built: test-set-size beam 5 and greedy on a lent GPU, today's search
# (no host reads between checks, every CHECK_EVERY steps on CUDA) beside the search before it
# (benchmarks/legacy_search.py) and Marian generate(), 3 rounds each, into $OUT (default
# benchmarks/results/gpu/). Each step under its own time limit (together 400 s); a benchmark
# stopped by its limit still writes what its finished cases measured.
#
#   benchmarks/gpu_decode_check.sh
# Not yet run: the device tool carries at most 64 MiB of the working tree, and this repository's
# tracked files are 137 MiB (results/: the archived studies' per-sentence files).
set -uo pipefail
out=${OUT:-benchmarks/results/gpu}
mkdir -p "$out"
if [ -d .whl ]; then  # packages the machine lacks, carried as wheels
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site
fi
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  python3 -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name())"
  timeout -k 10 260 python3 benchmarks/decode.py --device cuda --sentences 2000 --max_tokens 30000 --repeats 1 \
    --rounds 3 --cases ours_beam5_cached ours_beam5_legacy hf_beam5 --output "$out/decode_cuda_testset_nosync.json"
  timeout -k 10 140 python3 benchmarks/decode.py --device cuda --sentences 2000 --max_tokens 30000 --repeats 1 \
    --rounds 3 --cases ours_greedy_cached ours_greedy_legacy hf_greedy \
    --output "$out/decode_cuda_testset_nosync_greedy.json"
} 2>&1 | tee "$out/gpu_decode_check.log"
