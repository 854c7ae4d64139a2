#!/usr/bin/env bash
# Run the missing seeds of a declared study from one frozen commit, archive each run into results/ and
# commit it as soon as it is tested (a stop loses at most the runs in progress; the same command again
# resumes with what is archived). Every run of a study is trained from the same commit, so its seeds
# share one code fingerprint (provenance.json) and the family file stands in that commit
# (tests/study/test_declared.py).
#
#   tools/study_runs.sh STUDY COMMIT WORKERS DEADLINE
#     STUDY     any study with a family, configs/<study>/findings/headline.yaml (demo, length,
#               demo_confirm, report/trio, ...): tools/study_plan.py says which runs to train, pass by
#               pass — a fixed plan's missing seeds in one pass; a sequential plan's (`looks`) the seeds
#               of its next look for the comparisons still open, then the family recomputed, until the
#               plan stops (every declared comparison decided, or the last look)
#     COMMIT    the frozen commit (the one the study's archived runs record; a new study: the commit
#               that declared its family)
#     WORKERS   runs side by side, one CPU thread each (2 on a 2-core machine: 27% more runs per hour
#               than one run on two threads, measured)
#     DEADLINE  no run starts after this time (`date -d` syntax, e.g. 10:50)
# Progress: ../study_<study>.log (one line per run started, archived, failed; `/` in a study's name
# becomes `_`). `touch ../study_<study>.stop` stops it gently: the runs in progress finish and are
# archived, no other starts. A kill (SIGTERM) at any moment, then the same command: the runs in training
# resume from their checkpoints, a run archived but not committed is archived again and committed.
set -uo pipefail
cd "$(dirname "$0")/.."
MAIN=$(pwd)
STUDY=$1 COMMIT=$(git rev-parse --verify "$2^{commit}") WORKERS=$3 DEADLINE=$(date -d "$4" +%s) || exit 2
PY=$MAIN/.venv/bin/python
TREE=$MAIN/../study_$COMMIT
LOG=$MAIN/../study_${STUDY//\//_}.log
STOP=$MAIN/../study_${STUDY//\//_}.stop
LOCK=$MAIN/../.study_archive.lock
[ -e "configs/$STUDY/findings/headline.yaml" ] ||
  { echo "study_runs.sh: configs/$STUDY/findings/headline.yaml: no such family; give a study with one" >&2; exit 2; }
rm -f "$STOP"
[ -d "$TREE" ] || git worktree add --detach "$TREE" "$COMMIT" >/dev/null || exit 2
EXTRA=()
if [ "$STUDY" = length ]; then  # the length study's test-time variants, each run scored once per variant
  for s in linear ntk yarn; do
    EXTRA+=(--variant "${s}4" model.positional.scaling=$s model.positional.scaling_factor=4)
  done
fi
log() { echo "$(date -u +%FT%TZ) $*" >>"$LOG"; }

# The study's summary recomputed from what is archived, its pages rendered, and these committed with
# the runs named (under the archive lock: one commit at a time, never a half-written summary)
publish() {
  local message=$1; shift
  $PY compare.py "results/$STUDY/*" --family "configs/$STUDY/findings/headline.yaml" \
    --output "results/$STUDY/summary" --overwrite >/dev/null 2>&1 || return 1
  if [ -e "results/$STUDY/README.md" ]; then  # a study with a page (make readme renders them all)
    $PY tools/readme_results.py render >/dev/null || return 1
  fi
  local paths=() p
  for p in "$@" "results/$STUDY/test_sets" "results/$STUDY/"summary* "results/$STUDY/.harness_written.json"; do
    [ -e "$p" ] && paths+=("$p")
  done
  [ -e "results/$STUDY/README.md" ] && paths+=(README.md "results/$STUDY/README.md")
  git add -- "${paths[@]}" || return 1
  git diff --cached --quiet -- "${paths[@]}" && return 0  # nothing new
  for try in 1 2 3 4 5; do
    git commit -q -m "$message" -- "${paths[@]}" && return 0
    sleep 5
  done
  return 1
}

# Resuming: a run a kill left archived but not committed (or half archived) is archived again (the
# same bytes: archiving twice changes nothing) and committed with the summary recomputed
resume() {
  local again=()
  for dir in "$TREE/runs/$STUDY"/*/; do
    local run; run=$(basename "$dir")
    [ -e "$dir/test/scores.json" ] || continue
    git ls-files --error-unmatch "results/$STUDY/$run/provenance.json" >/dev/null 2>&1 && continue
    $PY tools/archive.py pack "$TREE/runs/$STUDY/$run" --runs "$TREE/runs" --results results >/dev/null || return 1
    again+=("results/$STUDY/$run")
  done
  [ -e "results/$STUDY/summary_findings.json" ] || [ ${#again[@]} -gt 0 ] || return 0  # nothing archived yet
  publish "archive $STUDY: ${#again[@]} run(s) a stop left uncommitted, and its summary (trained at $COMMIT)" "${again[@]}"
}

worker() {
  local w=$1 i
  for ((i = w; i < ${#units[@]}; i += WORKERS)); do
    [ "$(date +%s)" -lt "$DEADLINE" ] || { log "worker $w: deadline, stopping"; return; }
    [ ! -e "$STOP" ] || { log "worker $w: $STOP, stopping"; return; }
    read -r c seed run <<<"${units[$i]}"
    local seeds=(); [ "$run" = "$c" ] || seeds=(--seeds "$seed")  # the config's own seed: no _seed suffix
    log "worker $w: start $run"
    if (cd "$TREE" && nice -n 5 $PY sweep.py "configs/$STUDY/$c.yaml" "${seeds[@]}" "${EXTRA[@]}" \
        --set training.num_threads=1 >"runs/.${run}.log" 2>&1); then
      (
        flock 9
        $PY tools/archive.py pack "$TREE/runs/$STUDY/$run" --runs "$TREE/runs" --results results >/dev/null &&
          publish "archive $STUDY/$run (trained and tested at $COMMIT)" "results/$STUDY/$run"
      ) 9>"$LOCK"
      log "worker $w: archived $run (rc $?)"
    else
      log "worker $w: FAILED $run (see $TREE/runs/.${run}.log)"
    fi
  done
}

mkdir -p "$TREE/runs/$STUDY"
(flock 9; resume) 9>"$LOCK" || { log "$STUDY: resuming failed"; exit 1; }
while :; do  # a pass: the runs the plan wants now; a sequential plan's next look after each pass
  plan=$($PY tools/study_plan.py "$STUDY" "$COMMIT") || { log "$STUDY: tools/study_plan.py failed"; exit 2; }
  [ -n "$plan" ] || { log "$STUDY: nothing left to train (the plan is complete or stopped)"; break; }
  mapfile -t units <<<"$plan"
  log "$STUDY: ${#units[@]} runs to train now, $WORKERS workers, from $COMMIT"
  before=$(git rev-list --count HEAD)
  for ((w = 0; w < WORKERS; w++)); do worker "$w" & done
  wait
  [ "$(date +%s)" -lt "$DEADLINE" ] && [ ! -e "$STOP" ] || break
  [ "$(git rev-list --count HEAD)" -gt "$before" ] || { log "$STUDY: a pass archived nothing, stopping"; break; }
done
log "$STUDY: workers done"
