#!/usr/bin/env bash
# Paired A/B of cold-cache creates, for changes too small for bench/materialize.sh to show (its
# cold ratio divides the median wall clock by the median compile CPU of other runs, and both
# move by more than such a change on a noisy machine).
#
# Two cruxprov binaries (or one, under two environments) create the --size medium corpus's env
# alternately, N times each, every create after removing the env and the pyc cache (as the
# bench's cold rounds). Per run it takes the wall clock, cruxprov's own CPU (user+sys of the
# create from /usr/bin/time, minus its compile processes' compile_cpu_ns), the ratio to compile
# CPU / cores, and the wall clock no core worked (wall - all CPU / cores). It prints each side's
# medians and the paired differences B - A: mean ± standard error, median, and in how many pairs B
# was lower.
#
#   scripts/cold-ab.sh BIN_A BIN_B [N]
#     env: ENV_A, ENV_B  "VAR=value ..." set for that side's creates (e.g. ENV_B="GOGC=100")
#          PYTHON, CORPUS_SIZE (medium), MAKE_CORPUS (../shared/bench/make-corpus.py)
#
#   scripts/cold-ab.sh bin/cruxprov /tmp/cruxprov-new 12
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 64; }
A=$(realpath "$1"); B=$(realpath "$2"); N=${3:-12}
cd "$(dirname "$0")/.."
PY=${PYTHON:-/root/.pyenv/versions/3.11.7/bin/python3.11}
[ -x "$PY" ] || PY=$(command -v python3)
PY=$("$PY" -c 'import os,sys;print(os.path.realpath(sys.executable))')
MAKE_CORPUS=${MAKE_CORPUS:-../shared/bench/make-corpus.py}
[ -f "$MAKE_CORPUS" ] || { echo "cold-ab.sh: no $MAKE_CORPUS" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "cold-ab.sh: needs /usr/bin/time (apt install time)" >&2; exit 1; }

CRUXPROV=$A
. bench/lib/common.sh
bench_setup coldab
bench_cold_home
CORES=$(nproc)

run() { # run LABEL BIN ENVSPEC: one cold create, one line of figures
  chmod -R u+w "$H/envs" 2>/dev/null || true
  rm -rf "$H"/envs/[0-9a-f]* "$H/cache/pyc"; sync
  local s e
  s=$(date +%s%N)
  # shellcheck disable=SC2086 # ENVSPEC is a list of VAR=value words
  env $3 /usr/bin/time -f '%U %S' -o "$W/time" "$2" "${args[@]}" --offline --json >"$W/out.json"
  e=$(date +%s%N)
  jq -r --arg l "$1" --argjson w $(((e - s) / 1000)) --argjson cores "$CORES" --rawfile t "$W/time" '
    ($t | gsub("\\s+$"; "") | split(" ") | map(tonumber) | add * 1e6) as $all |
    (.timings.compile_cpu_ns / 1e3) as $c |
    "\($l) \($w / 1e3) \(($all - $c) / 1e3) \($w / ($c / $cores)) \(($w - $all / $cores) / 1e3)"' "$W/out.json"
}

echo "A: $A ${ENV_A:-}"; echo "B: $B ${ENV_B:-}"
echo "$N alternating pairs… (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
for _ in $(seq "$N"); do
  run A "$A" "${ENV_A:-}"
  run B "$B" "${ENV_B:-}"
done >"$W/runs"
"$PY" - "$W/runs" <<'PYEOF'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1])]
side = {k: [list(map(float, r[1:])) for r in rows if r[0] == k] for k in "AB"}
names = ["wall ms", "own CPU ms", "ratio", "idle ms"]
print(f"{'':12s} {'A median':>10s} {'B median':>10s}   B - A: mean ± s.e.    median   B lower")
for i, n in enumerate(names):
    a = [r[i] for r in side["A"]]; b = [r[i] for r in side["B"]]
    d = [y - x for x, y in zip(a, b)]
    se = st.stdev(d) / len(d) ** 0.5 if len(d) > 1 else float("nan")
    f = ".4f" if n == "ratio" else ".1f"
    # the median and the sign count hold against the outliers of this VM (a create now and then
    # takes twice the CPU, see docs/seal.md), which move the mean by more than a small change
    print(f"{n:12s} {st.median(a):10{f}} {st.median(b):10{f}}   {st.mean(d):+{f}} ± {se:{f}}"
          f"   {st.median(d):+{f}}   {sum(x < 0 for x in d)}/{len(d)}")
PYEOF
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
