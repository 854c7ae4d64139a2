#!/usr/bin/env bash
# The README's GPU figures in one command, for a lent GPU machine (issue 33): training throughput
# at 12k- and 32k-token batches (CUDA graphs, compiled, eager, the engine as it was, Marian,
# nn.Transformer), test-set-size beam-5 decoding against Marian generate(), and the compile
# check on the GPU. The cases run in order of what the README needs most.
# Recompilations are logged (TORCH_LOGS=recompiles). Results and the whole log go to $OUT
# (default benchmarks/results/gpu/). At most 10.5 minutes; the per-step limits stop it sooner.
#
#   benchmarks/gpu_check.sh
set -uo pipefail
out=${OUT:-benchmarks/results/gpu}
mkdir -p "$out"
if [ -d .whl ]; then  # packages the machine lacks (pytorch-ignite), carried as wheels
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site
fi
# recompiles, and perf hints (they say when Inductor skips CUDA graphs, and why)
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false TORCH_LOGS=recompiles,perf_hints
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  python3 -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name())"
  # each step under its own time limit, so one that hangs leaves the others their time
  timeout 330 python3 benchmarks/train.py --device cuda --precision bf16 --max_tokens 12000 --steps 20 \
    --cases ours_sinusoidal ours_legacy hf_marian nn_transformer ours_sinusoidal_cudagraphs ours_sinusoidal_compiled \
    --output "$out/train_cuda.json"
  timeout 120 python3 benchmarks/train.py --device cuda --precision bf16 --max_tokens 32000 --steps 20 \
    --cases ours_sinusoidal hf_marian ours_sinusoidal_cudagraphs \
    --output "$out/train_cuda_32k.json"
  timeout 90 python3 benchmarks/decode.py --device cuda --sentences 2000 --max_tokens 30000 --repeats 1 \
    --cases ours_beam5_cached hf_beam5 --output "$out/decode_cuda_testset.json"
  timeout 90 python3 -m pytest -q -p no:cacheprovider tests/test_compile.py -k cuda
} 2>&1 | tee "$out/gpu_check.log"
