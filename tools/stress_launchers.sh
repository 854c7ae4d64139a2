#!/usr/bin/env bash
# Run the launcher tests N times beside a CPU load, to find what fails only by chance (a stop landing
# in a window of a job's start-up, a test racing its own wait): one busy loop per core keeps every
# core taken while pytest runs tests/commands/test_launchers.py (slow tests included) again and again.
#
#   tools/stress_launchers.sh N [PYTEST ARGS...]
#     N             how many runs (the issue 75 note gives N = 30)
#     PYTEST ARGS   instead of the whole file, e.g. tests/commands/test_launchers.py::test_ctrl_c_stops_a_local_job_before_its_handlers
# Prints one line per run (pass/FAIL, seconds) and a total; exit 0 when every run passed, 1 otherwise.
# The output of a failed run is kept in $TMPDIR/stress_launchers.<pid>/run<i>.log (the folder is named
# at the end). The load ends with the script (a kill included): only its own loops are stopped.
set -uo pipefail
cd "$(dirname "$0")/.."
N=${1:-}
[[ "$N" =~ ^[1-9][0-9]*$ ]] || { echo "stress_launchers.sh: give how many runs, e.g. tools/stress_launchers.sh 30" >&2; exit 2; }
shift
TESTS=("$@")
[ ${#TESTS[@]} -gt 0 ] || TESTS=(tests/commands/test_launchers.py)
PY=.venv/bin/python
[ -x "$PY" ] || { echo "stress_launchers.sh: no $PY; run make venv first" >&2; exit 2; }
LOGS=$(mktemp -d "${TMPDIR:-/tmp}/stress_launchers.$$.XXXX")
LOAD=()
stop_load() {
  for pid in "${LOAD[@]}"; do kill "$pid" 2>/dev/null; done
  wait "${LOAD[@]}" 2>/dev/null
}
trap 'stop_load; exit 130' INT
trap 'stop_load; exit 143' TERM
trap stop_load EXIT
for _ in $(seq "$(nproc)"); do
  (while :; do :; done) &
  LOAD+=($!)
done
echo "stress_launchers.sh: $N run(s) of ${TESTS[*]} beside ${#LOAD[@]} busy loop(s)"
passed=0
for i in $(seq "$N"); do
  start=$(date +%s)
  if "$PY" -m pytest -q -x -p no:cacheprovider "${TESTS[@]}" >"$LOGS/run$i.log" 2>&1; then
    passed=$((passed + 1))
    rm -f "$LOGS/run$i.log"
    echo "run $i/$N: pass ($(($(date +%s) - start)) s)"
  else
    echo "run $i/$N: FAIL ($(($(date +%s) - start)) s): $(grep -E '^(FAILED|ERROR)' "$LOGS/run$i.log" | head -1)"
  fi
done
echo "stress_launchers.sh: $passed of $N run(s) passed$([ "$passed" = "$N" ] || echo "; logs of the failed ones in $LOGS")"
[ "$passed" = "$N" ] && rmdir "$LOGS" 2>/dev/null
[ "$passed" = "$N" ]
