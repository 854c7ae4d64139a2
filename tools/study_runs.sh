#!/usr/bin/env bash
# Run the missing seeds of a declared study from one frozen commit, archive each run into results/ and
# commit it as soon as it is tested (a stop loses at most the runs in progress; the same command again
# resumes with what is archived). Every run of a study is trained from the same commit, so its seeds
# share one code fingerprint (provenance.json) and the family file stands in that commit
# (tests/study/read/test_declared.py).
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
# Refused in one line (exit 2) before it trains anything: bad arguments, a second runner of the study
# (a lock beside the log), git's own lock held, a commit without the study's family or a family here
# that reads otherwise than in it, uncommitted changes to this checkout's code (it computes the summary;
# tools/study_ready.py). Each commit names the commit whose code computed its summary and holds only
# the files the runner wrote. Exit 2 at the end when a run failed or was not committed (the log says why).
set -uo pipefail
cd "$(dirname "$0")/.."
MAIN=$(pwd)
PY=$MAIN/.venv/bin/python
die() { echo "error: study_runs.sh: $*" >&2; exit 2; }  # a refusal: one line, nothing trained
[ $# -eq 4 ] || die "give STUDY COMMIT WORKERS DEADLINE (got $# argument(s)), e.g. tools/study_runs.sh demo_confirm fe14428 2 10:50"
STUDY=$1
COMMIT=$(git rev-parse --quiet --verify "$2^{commit}") || die "COMMIT '$2' is no commit of this repository: give the frozen commit the study's runs are trained from"
[[ $3 =~ ^[1-9][0-9]{0,2}$ ]] || die "WORKERS '$3' is no count of runs side by side: give a whole number from 1, e.g. 2"
WORKERS=$3
DEADLINE=$(date -d "$4" +%s 2>/dev/null) || die "DEADLINE '$4' is no time date -d reads: give one such as 10:50 or 'tomorrow 10:50'"
[ "$(date +%s)" -lt "$DEADLINE" ] || die "DEADLINE '$4' ($(date -d "@$DEADLINE" '+%F %T')) is already past: no run would start; give a later time"
[[ $STUDY =~ ^[A-Za-z0-9_][A-Za-z0-9_./-]*$ && $STUDY != *..* ]] || die "STUDY '$STUDY' is no study under configs/ (e.g. demo_confirm, report/trio)"
TREE=$MAIN/../study_$COMMIT
LOG=$MAIN/../study_${STUDY//\//_}.log
STOP=$MAIN/../study_${STUDY//\//_}.stop
LOCK=$MAIN/../.study_archive.lock
# one runner per study: a second one would train the same runs side by side (the runs it starts hold
# the lock too, so a runner killed alone leaves it held while they train)
exec 8>>"$MAIN/../.study_${STUDY//\//_}.lock"
flock -n 8 || die "another study_runs.sh (or a run it started) is running $STUDY: it holds $(realpath "$MAIN/../.study_${STUDY//\//_}.lock"); wait for it, or stop it (touch $(realpath -m "$STOP"))"
INDEX_LOCK=$(realpath -m "$(git rev-parse --git-path index.lock)")
git_free() {  # git's own lock: a git command running here, or one killed while it held it
  [ ! -e "$INDEX_LOCK" ] && return 0
  echo "$INDEX_LOCK exists: a git command is running in this checkout, or one was killed while it held it; wait for it, or remove the file if no git command runs, then run the same command again"
  return 1
}
why=$(git_free) || die "$why"
# the family stands in COMMIT as it is here, and this checkout's code is committed (it computes the summary)
$PY tools/study_ready.py "$STUDY" "$COMMIT" || exit 2
rm -f "$STOP"
[ -d "$TREE" ] || git worktree add --detach "$TREE" "$COMMIT" >/dev/null || die "git worktree add $TREE $COMMIT failed"
EXTRA=()
if [ "$STUDY" = length ]; then  # the length study's test-time variants, each run scored once per variant
  for s in linear ntk yarn; do
    EXTRA+=(--variant "${s}4" model.positional.scaling=$s model.positional.scaling_factor=4)
  done
fi
log() { echo "$(date -u +%FT%TZ) $*" >>"$LOG"; }
FAMILY=configs/$STUDY/findings/headline.yaml
# the folders of the file pairs the family declares (test_sets): sweep.py --family tests every run on each
# (read with this checkout's code: the family reads the same in COMMIT, tools/study_ready.py)
SETS=$($PY -c "import sys; from commands.sweep_plan import declared_file_sets as d
print(' '.join(s.folder for s in d(sys.argv[1])))" "$FAMILY" 2>&1) || die "reading $FAMILY: ${SETS##*$'\n'}"

# The study's summary recomputed from what is archived, its pages rendered, and these committed with
# the runs named and the commit whose code computed them (under the archive lock: one commit at a time,
# never a half-written summary). Only the files it wrote: refused, and logged, while this checkout has
# uncommitted changes to code or to the study's page (tools/study_ready.py): the next start commits it.
publish() {
  local message=$1 why head; shift
  why=$($PY tools/study_ready.py "$STUDY" "$COMMIT" 2>&1) || { log "$STUDY: not committed: ${why#error: }"; return 1; }
  $PY compare.py "results/$STUDY/*" --family "$FAMILY" \
    --output "results/$STUDY/summary" --overwrite >/dev/null 2>"$TREE/runs/.compare.log" ||
    { log "$STUDY: compare.py failed (see $TREE/runs/.compare.log)"; return 1; }
  if [ -e "results/$STUDY/README.md" ]; then  # a study with a page (make readme renders them all)
    $PY tools/readme_results.py render >/dev/null || { log "$STUDY: tools/readme_results.py render failed"; return 1; }
  fi
  # (again: an edit made while it computed)
  why=$($PY tools/study_ready.py "$STUDY" "$COMMIT" 2>&1) || { log "$STUDY: not committed: ${why#error: }"; return 1; }
  head=$(git rev-parse HEAD)
  local paths=() p
  for p in "$@" "results/$STUDY/test_sets" "results/$STUDY/"summary* "results/$STUDY/.harness_written.json"; do
    [ -e "$p" ] && paths+=("$p")
  done
  [ -e "results/$STUDY/README.md" ] && paths+=(README.md "results/$STUDY/README.md")
  for try in 1 2 3 4 5; do  # (git's lock: another git command here; a few tries)
    git add -- "${paths[@]}" 2>/dev/null && break
    sleep 5
  done
  why=$(git_free) || { log "$STUDY: not committed: $why"; return 1; }
  git diff --cached --quiet -- "${paths[@]}" && return 0  # nothing new
  for try in 1 2 3 4 5; do
    git commit -q -m "$message; summary computed at $head" -- "${paths[@]}" && return 0
    sleep 5
  done
  why=$(git_free) || { log "$STUDY: not committed: $why"; return 1; }
  log "$STUDY: not committed: git add or commit failed (git status says why)"
  return 1
}

# Resuming: a run a kill left archived but not committed (or half archived) is archived again (the
# same bytes: archiving twice changes nothing) and committed with the summary recomputed (a missing
# summary too: the plan reads where the study stands from it)
resume() {
  local again=()
  for dir in "$TREE/runs/$STUDY"/*/; do
    local run; run=$(basename "$dir")
    [ -e "$dir/test/scores.json" ] || continue
    local set missing=0
    for set in $SETS; do [ -e "$dir/$set/scores.json" ] || missing=1; done
    [ $missing -eq 0 ] || continue  # a declared test set not scored yet: the sweep tests it
    git ls-files --error-unmatch "results/$STUDY/$run/provenance.json" >/dev/null 2>&1 && continue
    $PY tools/archive.py pack "$TREE/runs/$STUDY/$run" --runs "$TREE/runs" --results results >/dev/null 2>&1 ||
      { log "$STUDY: tools/archive.py pack $TREE/runs/$STUDY/$run failed"; return 1; }
    again+=("results/$STUDY/$run")
  done
  [ ${#again[@]} -gt 0 ] || compgen -G "results/$STUDY/*/provenance.json" >/dev/null || return 0  # none archived yet
  publish "archive $STUDY: ${#again[@]} run(s) a stop left uncommitted, and its summary (trained at $COMMIT)" "${again[@]}"
}

worker() {  # exit status 1: a run of it failed or was not committed
  local w=$1 i failed=0
  for ((i = w; i < ${#units[@]}; i += WORKERS)); do
    [ "$(date +%s)" -lt "$DEADLINE" ] || { log "worker $w: deadline, stopping"; break; }
    [ ! -e "$STOP" ] || { log "worker $w: $STOP, stopping"; break; }
    read -r c seed run <<<"${units[$i]}"
    local seeds=(); [ "$run" = "$c" ] || seeds=(--seeds "$seed")  # the config's own seed: no _seed suffix
    log "worker $w: start $run"
    if (cd "$TREE" && nice -n 5 $PY sweep.py "configs/$STUDY/$c.yaml" "${seeds[@]}" "${EXTRA[@]}" \
        --family "$FAMILY" --set training.num_threads=1 >"runs/.${run}.log" 2>&1); then
      if (
        flock 9
        $PY tools/archive.py pack "$TREE/runs/$STUDY/$run" --runs "$TREE/runs" --results results >/dev/null &&
          publish "archive $STUDY/$run (trained and tested at $COMMIT)" "results/$STUDY/$run"
      ) 9>"$LOCK"; then
        log "worker $w: archived $run"
      else
        log "worker $w: NOT COMMITTED $run (the line above says why; the same command again commits it)"
        failed=1
      fi
    else
      log "worker $w: FAILED $run (see $TREE/runs/.${run}.log)"
      failed=1
    fi
  done
  return $failed
}

mkdir -p "$TREE/runs/$STUDY"
(flock 9; resume) 9>"$LOCK" || die "resuming $STUDY failed: $(tail -1 "$LOG" | cut -d' ' -f2-)"
failed=0
while :; do  # a pass: the runs the plan wants now; a sequential plan's next look after each pass
  plan=$($PY tools/study_plan.py "$STUDY" "$COMMIT" 2>"$TREE/runs/.plan.log") ||
    { why=$(tail -1 "$TREE/runs/.plan.log"); log "$STUDY: $why"; die "${why#error: }"; }
  [ -n "$plan" ] || { log "$STUDY: nothing left to train (the plan is complete or stopped)"; break; }
  mapfile -t units <<<"$plan"
  log "$STUDY: ${#units[@]} runs to train now, $WORKERS workers, from $COMMIT"
  before=$(git rev-list --count HEAD)
  pids=()
  for ((w = 0; w < WORKERS; w++)); do worker "$w" & pids+=($!); done
  for p in "${pids[@]}"; do wait "$p" || failed=1; done
  [ "$(date +%s)" -lt "$DEADLINE" ] && [ ! -e "$STOP" ] || break
  [ "$(git rev-list --count HEAD)" -gt "$before" ] || { log "$STUDY: a pass archived nothing, stopping"; break; }
done
log "$STUDY: workers done"
[ $failed -eq 0 ] || die "a run failed or was not committed: $LOG says which and why; the same command again trains or commits it"
