#!/usr/bin/env bash
# Wheels for a GPU machine without network: build the folder on a machine with network, send it with
# the checkout, install it there from the folder alone (docs/GPU.md).
#
#   benchmarks/gpu_wheels.sh [NAME ...]   # on the machine with network: the wheels into GPU_WHEELS_DIR
#   benchmarks/gpu_wheels.sh install      # on the GPU machine: install them, print the folder to put on
#                                         # PYTHONPATH (benchmarks/gpu_check.sh, tools/gpu_study.sh do)
#   benchmarks/gpu_wheels.sh --help
#
# Without NAMEs: every pin of requirements.txt (less GPU_WHEELS_SKIP) with all its dependencies, for a
# machine that has only Python; PyPI's Linux torch is its CUDA build, and it and its nvidia-* wheels
# are most of the folder's size. With NAMEs: only those packages, at requirements.txt's pins (a name
# not pinned there is taken as written, e.g. pydantic-core==2.50.5), without their dependencies: for
# a machine whose Python already has torch and most of the rest (`pip list` there says what is missing).
# `install` is `pip install --no-index --find-links DIR --no-deps --target SITE DIR/*.whl`: nothing is
# fetched, the machine's own Python (and its CUDA torch, if it has one) is left as it is.
#
# Environment (defaults in brackets):
#   GPU_WHEELS_DIR        the wheel folder [.whl, ignored by git]
#   GPU_WHEELS_PYTHON     the GPU machine's Python, X.Y [this machine's python3]
#   GPU_WHEELS_PLATFORMS  its platform tags [manylinux_2_28_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64]
#   GPU_WHEELS_SKIP       requirements.txt names left out without NAMEs [ruff]
#   GPU_WHEELS_SITE       where `install` puts them [/tmp/site]
#   PYTHON                the python that runs pip [python3]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
DIR=${GPU_WHEELS_DIR:-.whl}
case "${1:-}" in
-h | --help) sed -n '2,/^set /{/^set /d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
install)
  site=${GPU_WHEELS_SITE:-/tmp/site}
  ls "$DIR"/*.whl >/dev/null 2>&1 || { echo "error: no wheels in $DIR (benchmarks/gpu_wheels.sh, on a machine with network)" >&2; exit 2; }
  "$PY" -m pip install -q --no-index --find-links "$DIR" --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$site" "$DIR"/*.whl >&2
  echo "$site"
  exit 0 ;;
esac
version=${GPU_WHEELS_PYTHON:-$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')}
platforms=()
for p in ${GPU_WHEELS_PLATFORMS:-manylinux_2_28_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64}; do
  platforms+=(--platform "$p")
done
pin() { grep -i "^$1==" requirements.txt | head -1 || true; }
if [ $# -gt 0 ]; then
  wanted=() deps=(--no-deps)
  for name in "$@"; do p=$(pin "$name"); wanted+=("${p:-$name}"); done
else
  skip=" ${GPU_WHEELS_SKIP-ruff} " wanted=() deps=()
  while read -r line; do
    name=${line%%==*}
    [[ "$line" == *==* && "$skip" != *" $name "* ]] && wanted+=("$line")
  done < <(sed 's/#.*//; s/ //g; /^$/d' requirements.txt)
fi
"$PY" -m pip download -q "${deps[@]}" --only-binary=:all: --python-version "$version" --implementation cp \
  "${platforms[@]}" -d "$DIR" "${wanted[@]}"
ls "$DIR" | wc -l | xargs echo "wheels in $DIR:"
du -sh "$DIR"
