#!/usr/bin/env bash
# The main job on the embedded defaults, end to end, in a throwaway home:
# fixtures → inspect → a pinned index → per-platform resolution → fetch →
# interfaces → install (a sealed env, a proposed change-set) → diff → a key →
# approve → verify (fast, deep) → run with a secret on fd 3 and its receipt →
# tamper → verify and run refuse → the advised rebuild.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
bin=$root/bin/cruxprov
work=$(mktemp -d)
server=
cleanup() {
	[ -n "$server" ] && kill "$server" 2>/dev/null || true
	chmod -R u+w "$work" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
export CRUXPROV_HOME=$work/home
python=${PYTHON:-python3}

# headings in bold on a terminal only (a pipe or a log gets plain text), and never with NO_COLOR
if [ -t 1 ] && [ -z "${NO_COLOR:-}" ]; then BOLD=$'\033[1m' PLAIN=$'\033[0m'; else BOLD= PLAIN=; fi
step() { printf '\n%s== %s%s\n' "$BOLD" "$*" "$PLAIN"; }
show() { printf '$ %s\n' "$*" | sed "s#$work#\$WORK#g; s#$root/##g"; "$@"; }

step "cruxprov version"
show "$bin" version

step "build the fixture providers (deterministic wheels: runtime, acme-echo, acme-native, acme-scripts)"
go run ./internal/fixtures/cmd -out "$work/fx" >/dev/null
ls "$work/fx/wheels"
echo=$work/fx/wheels/acme_echo-1.0.0-py3-none-any.whl
native=$work/fx/wheels/acme_native-1.0.0-py3-none-any.whl

step "inspect a provider: identity, manifest, implementation digests, embedded lock"
show "$bin" inspect "$echo"

step "build a static PEP 503/691 index (a mirror) and serve it on loopback"
show "$bin" index build "$work/index" --from "$work/fx/wheels" --quiet
port=$("$python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$python" -m http.server --bind 127.0.0.1 --directory "$work/index" "$port" >/dev/null 2>&1 &
server=$!
index=http://127.0.0.1:$port/simple/
for _ in $(seq 50); do curl -fsS "$index" >/dev/null 2>&1 && break; sleep 0.1; done
echo "index at $index"

step "resolve acme-native's lock for five platforms: one wheel per package per platform"
show "$bin" lock resolve --wheel "$native" \
	--platform cp311-manylinux_2_39_x86_64,cp312-manylinux_2_17_aarch64,cp312-musllinux_1_2_x86_64,cp312-macosx_14_0_arm64,cp311-win_amd64

step "the host platform, probed once from the interpreter"
# (the whole output is read: `| head` would close the pipe early, and under
# pipefail the SIGPIPE it gives the writer fails the demo)
"$bin" platform show host --python "$python" | sed -n 1,4p

step "register the interfaces acme-echo implements (id → digest of the canonical schema)"
show "$bin" interface register acme.echo --schema "$work/fx/interfaces/acme.echo.json"
show "$bin" interface register acme.diagnostics --schema "$work/fx/interfaces/acme.diagnostics.json"

step "install acme-echo: interfaces checked, resolve → fetch (hash-checked) → install in Go → bytecode → seal, then a change-set is proposed"
show "$bin" install "$echo" --platform host --python "$python" --index "$index"
cs=$("$bin" changeset list --json | "$python" -c 'import json,sys; print(json.load(sys.stdin)["changeSets"][0]["metadata"]["id"])')

step "nothing runs until an operator approves: verify refuses (exit 78)"
set +e
"$bin" verify acme-echo
rc=$?
set -e
[ "$rc" -eq 78 ] || { echo "demo: verify accepted an unapproved provider" >&2; exit 1; }

step "the plan of the change-set, as terraform plan shows one"
show "$bin" changeset diff "$cs"

step "an approver key (cosign's encrypted format), trusted as the root of trust, signs the change-set"
export CRUXPROV_KEY_PASSWORD=demo-password
show "$bin" key generate --out "$work/alice"
show "$bin" key trust "$work/alice.pub" --name alice
show "$bin" changeset approve "$cs" --key "$work/alice.key"

step "verify before every run: the signed pin, this verifier's floor, the env (fast, then deep)"
export XDG_STATE_HOME=$work/state
show "$bin" verify acme-echo
show "$bin" verify acme-echo --deep --entrypoint echo
env=$("$bin" verify acme-echo --json | "$python" -c 'import json,sys; print(json.load(sys.stdin)["env"])')

step "run acme-echo's echo entrypoint with its secret on fd 3; the receipt is in the executor's ledger"
printf 'demo-secret' >"$work/token"
echo '{"hello": "world"}' | show "$bin" run acme-echo echo --input - --secret acme/api-token=@"$work/token"
show "$bin" receipts list

step "tamper with one installed file: verify and run refuse (exit 78), and the advice is a command that works"
target=$(find "$env/lib" -name '__init__.py' -path '*acme_echo*' -print -quit)
# root ignores the read-only mode (as an attacker with root would); others must chmod first
if [ "$(id -u)" -ne 0 ]; then chmod u+w "$target"; fi
echo "# tampered" >>"$target"
set +e
"$bin" verify acme-echo
rc=$?
echo '{"hello": "world"}' | "$bin" run acme-echo echo --input - --secret acme/api-token=@"$work/token"
rc2=$?
set -e
echo "exit $rc, run exit $rc2"
[ "$rc" -eq 78 ] && [ "$rc2" -eq 78 ] || { echo "demo: a tampered env was not refused" >&2; exit 1; }
show "$bin" env create --replace "$env" --offline
show "$bin" verify acme-echo --deep
show "$bin" receipts list
att=$("$bin" receipts list --status refused --last 1 --json | "$python" -c 'import json,sys; print(json.load(sys.stdin)["attempts"][0]["intent"]["attempt_id"])')
show "$bin" receipts show "$att"
echo
echo "demo: ok"
