#!/usr/bin/env bash
# verify NAME, what an executor pays before every run (issue 13), on the --size medium corpus
# of real wheels (../shared/bench/make-corpus.py, ~3,900 files) made into a governed store:
# interface registered, provider installed, a key trusted, the change-set approved.
#
#   1. in-process (Go API, verify.Verify: the pin + a fast verify of its env)  vs  a bare lstat
#      walk of that env (target: <= 1.5x); the pin part alone (target: < 1 ms)
#   2. the CLI (`cruxprov verify NAME`)  vs  `true` and `cruxprov version` (a Go binary's start)
#
# Usage: bench/verify.sh   (env: RUNS, PYTHON, CRUXPROV=path to a built binary)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-9}
PY=${PYTHON:-/root/.pyenv/versions/3.11.7/bin/python3.11}
MAKE_CORPUS=${MAKE_CORPUS:-../shared/bench/make-corpus.py}
[ -f "$MAKE_CORPUS" ] || { echo "verify.sh: no $MAKE_CORPUS; skipped"; exit 0; }
[ -x "$PY" ] || PY=$(command -v python3)
PY=$("$PY" -c 'import os,sys;print(os.path.realpath(sys.executable))')

. bench/lib/common.sh
bench_setup verify
export CRUXPROV_HOME=$W/home XDG_STATE_HOME=$W/state CRUXPROV_KEY_PASSWORD=bench

go run ./internal/fixtures/cmd -out "$W/fx" >/dev/null
RUNTIME=$(ls "$W"/fx/wheels/cruxible_provider_runtime-*.whl)
PORT=$(bench_free_port)
"$PY" "$MAKE_CORPUS" --out "$W/corpus" --size medium --python "$PY" --runtime-wheel "$RUNTIME" \
  --index-url "http://127.0.0.1:$PORT/simple/" | tail -1
bench_check_corpus "$PY" medium 1
bench_serve "$W/corpus" "$PORT"
ROOT=$("$PY" -c 'import json,sys; c=json.load(open(sys.argv[1])); print(c.get("root_wheel") or c.get("provider",{}).get("wheel",""))' "$W/corpus/corpus.json")
[ -n "$ROOT" ] || ROOT=$(ls "$W"/corpus/files/*provider*.whl 2>/dev/null | head -1)
case "$ROOT" in /*) ;; *) ROOT="$W/corpus/files/$ROOT" ;; esac
NAME=$("$BIN" inspect "$ROOT" --json | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["manifest"]["name"])')
IFACE=$("$BIN" inspect "$ROOT" --json | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["entrypoints"][0]["interface"]["id"])')
"$BIN" interface register "$IFACE" --schema "$W/corpus/interface-schema.json" >/dev/null
"$BIN" install "$ROOT" --platform host --python "$PY" --index "http://127.0.0.1:$PORT/simple/" --quiet >"$W/cs"
"$BIN" key generate --out "$W/k" >/dev/null
"$BIN" key trust "$W/k.pub" >/dev/null
"$BIN" changeset approve "$(cat "$W/cs")" --key "$W/k.key" >/dev/null
"$BIN" verify "$NAME" >/dev/null
ENV=$("$BIN" verify "$NAME" --json | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["env"])')
echo "provider $NAME: $(find "$ENV" | wc -l) entries in $ENV"

echo "== in-process (Go API): verify.Verify vs a bare lstat walk of the env; the pin part alone"
CRUXPROV_BENCH_HOME=$CRUXPROV_HOME CRUXPROV_BENCH_PROVIDER=$NAME \
  go test -run '^$' -bench 'VerifyFast|LstatWalk|VerifyPinOnly' -count "$RUNS" -benchtime 100x ./verify/ >"$W/go.txt"
"$PY" - "$W/go.txt" <<'PY'
import re, statistics, sys
ns = {}
for line in open(sys.argv[1]):
    m = re.match(r'Benchmark(\w+)-\d+\s+\d+\s+([\d.]+) ns/op', line)
    if m:
        ns.setdefault(m.group(1), []).append(float(m.group(2)))
med = {k: statistics.median(v) for k, v in ns.items()}
for k, v in med.items():
    print(f"  {k:16s} median {v/1e6:8.3f} ms  ({len(ns[k])} runs)")
if "VerifyFast" in med and "LstatWalk" in med:
    print(f"  ratio verify/lstat-walk = {med['VerifyFast']/med['LstatWalk']:.2f}  (target <= 1.5)")
PY

echo "== CLI: cruxprov verify NAME vs true and cruxprov version (medians of $RUNS alternating runs, ms)"
"$PY" - "$BIN" "$NAME" "$RUNS" <<'PY'
import statistics, subprocess, sys, time
bin, name, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
cmds = {"verify": [bin, "verify", name], "true": ["true"], "version": [bin, "version"]}
t = {k: [] for k in cmds}
for _ in range(runs):
    for k, c in cmds.items():
        s = time.perf_counter(); subprocess.run(c, check=True, stdout=subprocess.DEVNULL); t[k].append((time.perf_counter() - s) * 1e3)
m = {k: statistics.median(v) for k, v in t.items()}
for k in cmds:
    print(f"  {k:8s} {m[k]:8.2f}")
print(f"  verify - version = {m['verify'] - m['version']:.2f} ms on top of a Go binary's start")
PY
