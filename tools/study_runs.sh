#!/usr/bin/env bash
# Run the missing seeds of a declared study from one frozen commit, archive each run into results/ and
# commit it as soon as it is tested (a stop loses at most the runs in progress; the same command again
# resumes with what is missing). Every run of a study is trained from the same commit, so its seeds
# share one code fingerprint (provenance.json) and the family file stands in that commit
# (tests/study/test_declared.py).
#
#   tools/study_runs.sh STUDY COMMIT WORKERS DEADLINE
#     STUDY     demo | length | demo_confirm | report/trio (the configs and seeds of
#               configs/<study>/findings/headline.yaml's plan; a sequential plan's runs look by look:
#               the seeds of the first look not yet archived, and no further, study/sequential_family.py)
#     COMMIT    the frozen commit (the one the study's archived runs record; a new study: the commit
#               that declared its family)
#     WORKERS   runs side by side, one CPU thread each (2 on a 2-core machine: 27% more runs per hour
#               than one run on two threads, measured)
#     DEADLINE  no run starts after this time (`date -d` syntax, e.g. 10:50)
# Progress: ../study_<study>.log (one line per run started, archived, failed). `touch ../study_<study>.stop`
# stops it gently: the runs in progress finish and are archived, no other starts.
set -uo pipefail
cd "$(dirname "$0")/.."
MAIN=$(pwd)
STUDY=$1 COMMIT=$(git rev-parse --verify "$2^{commit}") WORKERS=$3 DEADLINE=$(date -d "$4" +%s) || exit 2
PY=$MAIN/.venv/bin/python
TREE=$MAIN/../study_$COMMIT
LOG=$MAIN/../study_$STUDY.log
STOP=$MAIN/../study_$STUDY.stop
rm -f "$STOP"
[ -d "$TREE" ] || git worktree add --detach "$TREE" "$COMMIT" >/dev/null
case $STUDY in
  demo | demo_confirm | report/trio) CONFIGS="sinusoidal learnable rope"; EXTRA=() ;;
  length)
    CONFIGS="sinusoidal learnable rope alibi t5_bias sinusoidal_concat"
    EXTRA=()
    for s in linear ntk yarn; do
      EXTRA+=(--variant "${s}4" model.positional.scaling=$s model.positional.scaling_factor=4)
    done ;;
  *) echo "study_runs.sh: unknown study $STUDY (demo, length, demo_confirm or report/trio)" >&2; exit 2 ;;
esac
SEEDS=$($PY -c "from study.family import load_family as f; print(*f('configs/$STUDY/findings/headline.yaml').seeds)") &&
  [ -n "$SEEDS" ] || { echo "study_runs.sh: no planned seeds read from configs/$STUDY/findings/headline.yaml" >&2; exit 2; }
LOOKS=$($PY -c "from study.family import load_family as f; print(*(f('configs/$STUDY/findings/headline.yaml').looks or ()))")
# the configs' own seed (their run folders carry no _seed suffix), as the study's configs resolve it
OWN=$($PY -c "from settings.config import load_config
print(load_config('configs/$STUDY/${CONFIGS%% *}.yaml', []).seed)")

archived() {  # run folder name -> archived from this commit?
  grep -q "$COMMIT" "results/$STUDY/$1/provenance.json" 2>/dev/null
}
# a sequential plan: the seeds of the first look whose runs are not all archived, never beyond it
if [ -n "$LOOKS" ]; then
  for n in $LOOKS; do
    upto=$n missing=0
    for seed in $(echo $SEEDS | cut -d' ' -f1-"$n"); do
      for c in $CONFIGS; do
        run=$c; [ "$seed" = "$OWN" ] || run=${c}_seed$seed
        archived "$run" || missing=1
      done
    done
    [ $missing = 0 ] || break
  done
  SEEDS=$(echo $SEEDS | cut -d' ' -f1-"$upto")
  echo "$(date -u +%FT%TZ) $STUDY: sequential plan (looks $LOOKS): the seeds of the look at $upto" >>"$LOG"
fi

# the (config, seed) units not yet archived from this commit, seed-major, dealt to the workers in turn
units=()
for seed in $SEEDS; do
  for c in $CONFIGS; do
    run=$c; [ "$seed" = "$OWN" ] || run=${c}_seed$seed
    archived "$run" || units+=("$c:$seed:$run")
  done
done
echo "$(date -u +%FT%TZ) $STUDY: ${#units[@]} runs missing, $WORKERS workers, from $COMMIT" >>"$LOG"

worker() {
  local w=$1 i
  for ((i = w; i < ${#units[@]}; i += WORKERS)); do
    [ "$(date +%s)" -lt "$DEADLINE" ] || { echo "$(date -u +%FT%TZ) worker $w: deadline, stopping" >>"$LOG"; return; }
    [ ! -e "$STOP" ] || { echo "$(date -u +%FT%TZ) worker $w: $STOP, stopping" >>"$LOG"; return; }
    IFS=: read -r c seed run <<<"${units[$i]}"
    local seeds=(); [ "$seed" = "$OWN" ] || seeds=(--seeds "$seed")
    echo "$(date -u +%FT%TZ) worker $w: start $run" >>"$LOG"
    if (cd "$TREE" && nice -n 5 $PY sweep.py "configs/$STUDY/$c.yaml" "${seeds[@]}" "${EXTRA[@]}" \
        --set training.num_threads=1 >"runs/.$run.log" 2>&1); then
      (
        flock 9
        # the run, and the study's summary recomputed with it (compare.py: interim until its look)
        $PY tools/archive.py pack "$TREE/runs/$STUDY/$run" --runs "$TREE/runs" --results results >/dev/null &&
          $PY compare.py "results/$STUDY/*" --family "configs/$STUDY/findings/headline.yaml" \
            --output "results/$STUDY/summary" --overwrite >/dev/null 2>&1 &&
          $PY tools/readme_results.py render >/dev/null &&  # the pages' generated blocks (make readme)
          git add "results/$STUDY/$run" "results/$STUDY/test_sets" "results/$STUDY/"summary* \
            "results/$STUDY/.harness_written.json" README.md "results/$STUDY/README.md" &&
          for try in 1 2 3 4 5; do
            git commit -q -m "archive $STUDY/$run (trained and tested at $COMMIT)" -- "results/$STUDY/$run" \
              "results/$STUDY/test_sets" "results/$STUDY/"summary* "results/$STUDY/.harness_written.json" \
              README.md "results/$STUDY/README.md" && break
            sleep 5
          done
      ) 9>"$MAIN/../.study_archive.lock"
      echo "$(date -u +%FT%TZ) worker $w: archived $run (rc $?)" >>"$LOG"
    else
      echo "$(date -u +%FT%TZ) worker $w: FAILED $run (see $TREE/runs/.$run.log)" >>"$LOG"
    fi
  done
}
mkdir -p "$TREE/runs"
for ((w = 0; w < WORKERS; w++)); do worker "$w" & done
wait
echo "$(date -u +%FT%TZ) $STUDY: workers done" >>"$LOG"
