#!/usr/bin/env bash
# The executor's overhead per call (issue 14 item 7), side by side with its floor: spawning the
# env's python with the harness directly on the same request.
#
#   Go API   invoke.Subprocess in a loop (BenchmarkInvoke in invoke/bench_test.go): the watch-backed
#            verify (one full verify, then O(1) while nothing changed), the intent and outcome synced
#            to a ledger, every §10 obligation; beside it the same with a fast seal verify on every
#            call, and the bare spawn from Go. On the fixture env (acme-hostile probe) and on the
#            --size medium corpus env (~3,900 files, bench-provider echo). Target: <= 1.2x bare.
#   CLI      `cruxprov run` (pin verify from scratch, ledger, spawn) vs the bare spawn from this
#            shell, on the corpus env (bench-provider echo) and the fixture acme-echo env (with its
#            secret on fd 3); and on the corpus env with a ledger of LEDGER_RECEIPTS receipts,
#            from its checkpoint and read whole (docs/receipts.md "Checkpoint").
#
# Each round runs every measurement once, alternating; RUNS rounds (default 7), medians printed.
# Usage: bench/invoke.sh   (env: RUNS, N Go iterations per round (20), K CLI calls per round (10),
#                           PYTHON (the env's interpreter), CORPUS_PYTHON (whose site-packages
#                           make the corpus), CRUXPROV=path to a built binary,
#                           LEDGER_RECEIPTS (20000))
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-7}
N=${N:-20}
K=${K:-10}
PY=${PYTHON:-/usr/bin/python3.11}
CPY=${CORPUS_PYTHON:-/root/.pyenv/versions/3.11.7/bin/python3.11}
MAKE_CORPUS=${MAKE_CORPUS:-../shared/bench/make-corpus.py}
[ -f "$MAKE_CORPUS" ] || { echo "invoke.sh: no $MAKE_CORPUS; skipped"; exit 0; }
[ -x "$PY" ] || { echo "invoke.sh: no $PY; skipped"; exit 0; }
[ -x "$CPY" ] || CPY=$PY

. bench/lib/common.sh
bench_setup invoke
go test -c -o "$W/invoke.test" ./invoke

H=$W/home
export CRUXPROV_KEY_PASSWORD=bench # the throwaway approver key's
cx() { "$BIN" --home "$H" "$@"; }
field() { "$PY" -c 'import json,sys; v=json.load(sys.stdin)
for k in sys.argv[1].split("."): v=v[k]
print(v)' "$1"; }

# The corpus (the runtime wheel in its lock), the fixture wheels, one mirror of both on loopback.
go run ./internal/fixtures/cmd -out "$W/fx" >/dev/null
RT=$(ls "$W"/fx/wheels/cruxible_provider_runtime-*.whl)
PORT=$(bench_free_port)
INDEX=http://127.0.0.1:$PORT/simple/
"$PY" "$MAKE_CORPUS" --out "$W/corpus" --size medium --python "$CPY" --runtime-wheel "$RT" --index-url "$INDEX" | tail -1
bench_check_corpus "$CPY" medium 1
mkdir "$W/wheels"
cp "$W"/corpus/files/*.whl "$W"/fx/wheels/acme_echo-*.whl "$W/wheels/"
cx index build "$W/index" --from "$W/wheels" --quiet
bench_serve "$W/index" "$PORT"

# Governance, so that `cruxprov run` has accepted pins: one approver key, the interfaces, an
# install change-set per provider, approved.
mkdir -m 700 "$W/keys"
cx key generate --out "$W/keys/ops" >/dev/null
cx key trust "$W/keys/ops.pub" >/dev/null
cx interface register bench.echo --schema "$W/corpus/interface-schema.json" >/dev/null
cx interface register acme.echo --schema "$W/fx/interfaces/acme.echo.json" >/dev/null
cx interface register acme.diagnostics --schema "$W/fx/interfaces/acme.diagnostics.json" >/dev/null
install() { # install WHEEL -> prints the env path
  cx install "$1" --platform host --python "$PY" --index "$INDEX" --json >"$W/install.json"
  cx changeset approve "$(field changeSet.metadata.id <"$W/install.json")" --key "$W/keys/ops.key" >/dev/null
  "$PY" -c 'import json,sys; print(list(json.load(open(sys.argv[1]))["envs"].values())[0])' "$W/install.json"
}
CORPUS_ENV=$(install "$W"/corpus/files/bench_provider-*.whl)
ECHO_ENV=$(install "$W"/fx/wheels/acme_echo-*.whl)
echo "corpus env: $(find "$CORPUS_ENV" | wc -l) entries ($(find "$CORPUS_ENV" -type d | wc -l) directories)"

# The requests: what `run` sends (protocol v1), for the bare spawns from the shell.
req() { # req PROVIDER_OBJECT ENTRYPOINT SECRETS_JSON EGRESS_JSON
  printf '{"protocol_version":1,"run_id":"bench","entrypoint":"%s","object":"%s","input":{"hello":"world"},"secret_channel":%s,"budgets":{"timeout_ms":30000,"output_bytes":1048576},"egress_declared":%s,"idempotency_key":null}\n' "$2" "$1" "$3" "$4"
}
req bench_provider.impl:Echo echo null '[]' >"$W/req-corpus.json"
req acme_echo:Echo echo '{"fd":3,"refs":["acme/api-token"]}' '["https://api.acme.example/*"]' >"$W/req-echo.json"
echo '{"hello":"world"}' >"$W/input.json"
printf 'bench-token' >"$W/token"
HARNESS=cruxible_provider_runtime.harness
bare_corpus() { "$CORPUS_ENV/bin/python" -I -m $HARNESS <"$W/req-corpus.json" >/dev/null; }
bare_echo() { "$ECHO_ENV/bin/python" -I -m $HARNESS <"$W/req-echo.json" >/dev/null 2>&1 3< <(printf '{"acme/api-token":"bench-token"}'); }
run_corpus() { cx run bench-provider echo --input "$W/input.json" --ledger "$W/ledger.jsonl" --state-dir "$W/state" >/dev/null; }
run_echo() { cx run acme-echo echo --input "$W/input.json" --secret "acme/api-token=@$W/token" --ledger "$W/ledger.jsonl" --state-dir "$W/state" >/dev/null 2>&1; }
for f in bare_corpus bare_echo run_corpus run_echo; do $f || { echo "invoke.sh: $f failed" >&2; exit 1; }; done

# A ledger that has seen many runs: $LEDGER_RECEIPTS receipts (copies of the runs' rows above, each
# under an attempt id of its own), in two copies: one with its checkpoint (written by the first
# run), one whose checkpoint path is a directory, so that every `run` reads it whole (as before
# checkpoints: only the hash of the rows, ~1/8 of the read, is extra).
LR=${LEDGER_RECEIPTS:-20000}
"$PY" - "$W/ledger.jsonl" "$W/big.jsonl" "$LR" <<'PYEOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
per = sum(r["phase"] == "intent" for r in rows)
with open(sys.argv[2], "w") as f:
    for i in range(-(-int(sys.argv[3]) // per)):
        for r in rows:
            f.write(json.dumps(dict(r, attempt_id=f"{r['attempt_id']}-{i}"), separators=(",", ":"), ensure_ascii=False) + "\n")
PYEOF
cp "$W/big.jsonl" "$W/big-nock.jsonl"
mkdir "$W/big-nock.jsonl.checkpoint"
run_big() { cx run bench-provider echo --input "$W/input.json" --ledger "$W/big.jsonl" --state-dir "$W/state" >/dev/null; }
run_big_nock() { cx run bench-provider echo --input "$W/input.json" --ledger "$W/big-nock.jsonl" --state-dir "$W/state" >/dev/null; }
for f in run_big run_big_nock; do $f || { echo "invoke.sh: $f failed" >&2; exit 1; }; done
echo "ledgers of $(grep -c '"phase":"intent"' "$W/big.jsonl") receipts ($(du -m "$W/big.jsonl" | cut -f1) MB)"

declare -A T
add() { T[$1]="${T[$1]:-} $2"; }
median() { tr ' ' '\n' <<<"$1" | grep . | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
ms() { awk -v n="$1" 'BEGIN {printf "%.1f", n/1e6}'; }
now() { date +%s%N; }
KC=0
kids_cpu() { # KC = the CPU time (user + system) of this shell's waited-for children, in ns
  times >"$W/times" # in this shell: a pipe or $(…) would time a subshell's children
  KC=$(tail -1 "$W/times" | awk '{ s = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); s += a[1] * 60 + a[2] } printf "%.0f", s * 1e9 }')
}
loop() { # loop NAME FUNC: K calls, the mean per call in ns, wall and CPU
  local t0 t1 c0
  kids_cpu
  c0=$KC
  t0=$(now)
  for _ in $(seq "$K"); do $2; done
  t1=$(now)
  kids_cpu
  add "$1" $(((t1 - t0) / K))
  add "cpu:$1" $(((KC - c0) / K))
}

echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores; $RUNS rounds (Go: $N calls each; CLI: $K)"
for r in $(seq "$RUNS"); do
  loop cli-corpus-bare bare_corpus
  loop cli-corpus-run run_corpus
  loop cli-echo-bare bare_echo
  loop cli-echo-run run_echo
  loop cli-big-run run_big
  loop cli-big-nock run_big_nock
  CRUXPROV_BENCH_CORPUS_ENV=$CORPUS_ENV "$W/invoke.test" -test.run '^$' -test.bench '^BenchmarkInvoke$' \
    -test.benchtime "${N}x" >"$W/go.txt" 2>&1 || { cat "$W/go.txt"; exit 1; }
  while read -r name _ ns _ cpu _; do
    name=go-${name#BenchmarkInvoke/}
    name=${name%-[0-9]*}
    add "$name" "$ns"
    add "cpu:$name" "${cpu%.*}"
  done < <(grep '^BenchmarkInvoke/' "$W/go.txt")
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a/b}'; }
row() { # row LABEL KEY BASE_KEY
  local m b cm cb
  m=$(median "${T[$2]}")
  b=$(median "${T[$3]}")
  cm=$(median "${T[cpu:$2]}")
  cb=$(median "${T[cpu:$3]}")
  printf '  %-40s %8s ms %6sx   %8s ms %6sx\n' "$1" "$(ms "$m")" "$(ratio "$m" "$b")" "$(ms "$cm")" "$(ratio "$cm" "$cb")"
}
echo "medians per call; the ratio is to the bare spawn; wall clock, then CPU time (user + system,"
echo "the process and its children: steadier than the wall clock on a shared machine)"
printf '  %-40s %11s %7s   %11s %7s\n' "" "wall" "" "cpu" ""
for env in fixture corpus; do
  echo "Go API, $env env:"
  row "bare spawn (python -I -m harness)" "go-$env/bare-spawn" "go-$env/bare-spawn"
  row "invoke.Subprocess + watch.Verifier" "go-$env/go-api-watched" "go-$env/bare-spawn"
  row "invoke.Subprocess + fast seal verify" "go-$env/go-api-fast-verify" "go-$env/bare-spawn"
done
echo "CLI, corpus env, bench-provider echo (the bare spawn from this shell):"
row "bare spawn" cli-corpus-bare cli-corpus-bare
row "cruxprov run" cli-corpus-run cli-corpus-bare
echo "CLI, fixture env, acme-echo echo with a secret on fd 3:"
row "bare spawn" cli-echo-bare cli-echo-bare
row "cruxprov run" cli-echo-run cli-echo-bare
echo "CLI, corpus env, with a ledger of $LR receipts (the ratio is to a run on the small ledger):"
row "cruxprov run, ledger checkpointed" cli-big-run cli-corpus-run
row "cruxprov run, ledger read whole" cli-big-nock cli-corpus-run
