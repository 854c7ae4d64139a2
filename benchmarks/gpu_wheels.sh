#!/usr/bin/env bash
# The wheels a lent GPU machine lacks (its image has torch, transformers, sacrebleu, safetensors, ...:
# /work/.library/device/KINDS.md), fetched here into .whl/ (ignored by git) for `carry: [".whl"]`;
# benchmarks/gpu_check.sh installs them there. Versions as requirements.txt pins them; Python 3.12.
#
#   benchmarks/gpu_wheels.sh
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo /.whl/ >> .git/info/exclude
pin() { grep -i "^$1==" requirements.txt | head -1; }
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
  "$(pin pytorch-ignite)" "$(pin nltk)" "$(pin pydantic)" pydantic-core==2.50.5 annotated-types==0.8.0 \
  typing-inspection==0.4.5 defusedxml==0.7.1
ls -l .whl
