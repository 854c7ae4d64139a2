#!/usr/bin/env bash
# The length study at the report's size (6+6 layers, d_model 512, 8 heads, FFN 2048, bf16,
# 12k-token batches) for every encoding of configs/length/, one seed, on ONE GPU: a step of this
# model is launch-bound (a few % of the GPU's arithmetic), so the runs train side by side, JOBS at
# a time, each a resumable `sweep.py` of one config (logs in RUNS_ROOT/logs/).
# Usage: bash docs/tools/length_report_gpu.sh [JOBS [RUNS_ROOT]] [--set KEY=VALUE ...]
# Then:  python compare.py "RUNS_ROOT/length/*" --output RUNS_ROOT/length/summary
# Exits non-zero when any run failed (its log says why).
set -uo pipefail
JOBS=10
ROOT=runs/report
if [[ $# -gt 0 && $1 != --* ]]; then JOBS=$1; shift; fi
if [[ $# -gt 0 && $1 != --* ]]; then ROOT=$1; shift; fi
PY=${PYTHON:-python3}
SIZE=(--set model.d_model=512 --set model.num_heads=8 --set model.num_encoder_layers=6
      --set model.num_decoder_layers=6 --set model.ffn_dim=2048 --set training.lr=0.0007
      --set training.max_tokens=12000 --set training.precision=bf16 --set training.num_threads=1
      --set decoding.precision=bf16 --set decoding.max_tokens=16000 "$@")
mkdir -p "$ROOT/logs"
export OMP_NUM_THREADS=1
# Tokenizer and encoded splits first, once, with the same overrides: the runs then read them from
# the data cache instead of all building them at once.
"$PY" - "${SIZE[@]}" <<'PY' || exit 2
import sys
import tempfile

from data import make_corpus_loader
from train import prepare_data
from utils.config import load_config
from utils.errors import HarnessError

sets = [value for flag, value in zip(sys.argv[1::2], sys.argv[2::2]) if flag == "--set"]
try:
    cfg = load_config("configs/length/sinusoidal.yaml", [*sets, f"run_dir={tempfile.mkdtemp()}"])
    prepare_data(cfg, make_corpus_loader(cfg.data))
except HarnessError as e:
    sys.exit(f"error: {e}")
PY
ls configs/length/*.yaml | grep -v /base.yaml | xargs -P "$JOBS" -I{} bash -c \
  'cfg=$1; root=$2; shift 2; "$0" sweep.py "$cfg" --runs_root "$root" "$@" > "$root/logs/$(basename "$cfg" .yaml).log" 2>&1
   rc=$?; echo "$cfg: exit $rc"; exit $(( rc == 0 ? 0 : 1 ))' \
  "$PY" {} "$ROOT" "${SIZE[@]}"
