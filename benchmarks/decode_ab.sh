#!/usr/bin/env bash
# CPU decoding speed of this tree against an earlier commit, in alternating fresh processes:
# benchmarks/decode.py --quick, one case per process, base then this tree, ROUNDS rounds (default 9);
# prints each case's per-round ratio (this tree / base) and their median, and writes them as JSON.
#
#   benchmarks/decode_ab.sh 8a5bdbd [benchmarks/results/decode_ab.json]
set -euo pipefail
base=$1 out=${2:-benchmarks/results/decode_ab.json} rounds=${ROUNDS:-9}
root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-$root/.venv/bin/python}
tmp=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$tmp/base" >/dev/null 2>&1; rm -rf "$tmp"' EXIT
git -C "$root" worktree add --detach -q "$tmp/base" "$base"
cases=(ours_beam5_cached ours_greedy_cached)
for r in $(seq "$rounds"); do
  for tree in base head; do
    dir=$tmp/base; [ $tree = head ] && dir=$root
    for c in "${cases[@]}"; do
      (cd "$dir" && "$python" benchmarks/decode.py --quick --rounds 1 --cases "$c" --output "$tmp/${tree}_${c}_$r.json" >/dev/null)
    done
  done
  echo "round $r of $rounds" >&2
done
"$python" - "$tmp" "$rounds" "$base" "$out" "${cases[@]}" <<'PY'
import json, statistics, sys
tmp, rounds, base, out, cases = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:]
speed = lambda tree, c, r: json.load(open(f"{tmp}/{tree}_{c}_{r}.json"))["results"][0]["sentences_per_sec"]
summary = {"base": base, "rounds": rounds, "command": "benchmarks/decode.py --quick --rounds 1 --cases CASE"}
for c in cases:
    ratios = [speed("head", c, r) / speed("base", c, r) for r in range(1, rounds + 1)]
    summary[c] = {"median_ratio": round(statistics.median(ratios), 3), "per_round": [round(x, 3) for x in ratios]}
    print(f"{c}: this tree / {base} = {summary[c]['median_ratio']:.3f} (per round {summary[c]['per_round']})")
json.dump(summary, open(out, "w"), indent=2)
print(f"wrote {out}")
PY
