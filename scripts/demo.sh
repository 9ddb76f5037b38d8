#!/usr/bin/env bash
# The main job on the embedded defaults, end to end, in a throwaway home:
# fixtures → inspect → a pinned index → per-platform resolution → fetch →
# a sealed env → verify (fast, deep) → one provider call through the harness
# with its secret on fd 3 → tamper → verify refuses.
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

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
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

step "create a sealed env for acme-echo on the host: resolve, fetch (hash-checked), install, compile, seal"
show "$bin" env create --wheel "$echo" --platform host --python "$python" --index "$index"
env=$("$bin" env list --json | "$python" -c 'import json,sys; print(json.load(sys.stdin)["envs"][0]["path"])')

step "verify before every run: fast (stat index), then deep (rehash everything)"
show "$bin" env verify "$env"
show "$bin" env verify "$env" --deep

step "call the provider through the harness: request on stdin, secret bundle on fd 3"
cat >"$work/request.json" <<JSON
{"protocol_version": 1, "run_id": "demo-1", "entrypoint": "echo", "object": "acme_echo:Echo", "input": {"hello": "world"}, "secret_channel": {"fd": 3, "refs": ["acme/api-token"]}, "budgets": {"timeout_ms": 30000, "output_bytes": 1048576}, "egress_declared": ["https://api.acme.example/*"], "idempotency_key": null}
JSON
"$env/bin/python" -I -m cruxible_provider_runtime.harness <"$work/request.json" \
	3< <(printf '{"acme/api-token": "demo-secret"}') 2>/dev/null
echo

step "tamper with one installed file: verify refuses (exit 78)"
target=$(find "$env/lib" -name '__init__.py' -path '*acme_echo*' -print -quit)
# root ignores the read-only mode (as an attacker with root would); others must chmod first
if [ "$(id -u)" -ne 0 ]; then chmod u+w "$target"; fi
echo "# tampered" >>"$target"
set +e
"$bin" env verify "$env"
rc=$?
set -e
echo "exit $rc"
[ "$rc" -eq 78 ] || { echo "demo: verify did not refuse a tampered env" >&2; exit 1; }

echo
echo "demo: ok"
