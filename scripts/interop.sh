#!/usr/bin/env bash
# make interop (not part of make test): build a signed provider image on a
# bookworm base, push it to a local docker-registry, and have cosign v2
# verify its signature and both attestations offline; cruxprov's own image
# verify too (it also checks the signed repository, which cosign does not).
# Needs: docker-registry, mmdebstrap, umoci (apt), cosign v2.6.5 on PATH or
# in $(go env GOPATH)/bin (go install github.com/sigstore/cosign/v2/cmd/cosign@v2.6.5).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
bin=$root/bin/cruxprov
work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	chmod -R u+w "$work" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
export CRUXPROV_HOME=$work/home
export SOURCE_DATE_EPOCH=1700000000
python=${PYTHON:-python3}
# headings in bold on a terminal only (a pipe or a log gets plain text), and never with NO_COLOR
if [ -t 1 ] && [ -z "${NO_COLOR:-}" ]; then BOLD=$'\033[1m' PLAIN=$'\033[0m'; else BOLD= PLAIN=; fi
step() { printf '\n%s== %s%s\n' "$BOLD" "$*" "$PLAIN"; }
show() { printf '$ %s\n' "$*" | sed "s#$work#\$WORK#g; s#$root/##g" >&2; "$@"; }
need() { command -v "$1" >/dev/null || { echo "interop: $1 is missing ($2)" >&2; exit 1; }; }
port() { "$python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

cosign=$(command -v cosign || echo "$(go env GOPATH)/bin/cosign")
[ -x "$cosign" ] || { echo "interop: cosign is missing (go install github.com/sigstore/cosign/v2/cmd/cosign@v2.6.5)" >&2; exit 1; }
need docker-registry "apt-get install docker-registry"
need mmdebstrap "apt-get install mmdebstrap"
need umoci "apt-get install umoci"
show "$cosign" version 2>&1 | grep -E '^GitVersion' || true

step "a bookworm base image with python3.11 (mmdebstrap, cached in ${TMPDIR:-/tmp}) as an OCI layout"
cache=${TMPDIR:-/tmp}/cruxprov-interop-base-$SOURCE_DATE_EPOCH
if [ ! -f "$cache/digest" ]; then
	rm -rf "$cache" && mkdir -p "$cache"
	mmdebstrap --quiet --variant=essential --include=python3-minimal,libpython3.11-stdlib bookworm "$cache/base.tar"
	umoci init --layout "$cache/oci"
	umoci new --image "$cache/oci:base"
	umoci raw add-layer --image "$cache/oci:base" "$cache/base.tar"
	rm "$cache/base.tar"
	jq -r '.manifests[] | select(.annotations["org.opencontainers.image.ref.name"]=="base") | .digest' "$cache/oci/index.json" >"$cache/digest"
fi
base="oci:$cache/oci@$(cat "$cache/digest")"
echo "base $base"

step "fixtures, a pinned index on loopback, cruxshim (static, amd64), a builder key"
go run ./internal/fixtures/cmd -out "$work/fx" >/dev/null
echo=$work/fx/wheels/acme_echo-1.0.0-py3-none-any.whl
"$bin" index build "$work/index" --from "$work/fx/wheels" --quiet
ip=$(port)
"$python" -m http.server --bind 127.0.0.1 --directory "$work/index" "$ip" >/dev/null 2>&1 &
pids+=($!)
CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -ldflags=-buildid= -o "$work/cruxshim" ./cmd/cruxshim
export CRUXPROV_KEY_PASSWORD=interop COSIGN_PASSWORD=interop
show "$bin" key generate --out "$work/builder" --quiet

step "a local docker-registry (own config, temp storage)"
rp=$(port)
mkdir -p "$work/registry"
cat >"$work/registry/config.yml" <<YAML
version: 0.1
log: {level: error}
storage: {filesystem: {rootdirectory: $work/registry/data}}
http: {addr: 127.0.0.1:$rp}
YAML
docker-registry serve "$work/registry/config.yml" >"$work/registry/log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$rp/v2/" >/dev/null && break; sleep 0.05; done
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$ip/simple/" >/dev/null && break; sleep 0.05; done
repo=127.0.0.1:$rp/acme/echo

step "image build → push, signed (signature, SLSA v1 provenance, CycloneDX SBOM)"
show "$bin" image build --wheel "$echo" --index "http://127.0.0.1:$ip/simple/" --platform cp311-manylinux_2_36_x86_64 \
	--base "$base" --shim "$work/cruxshim" --push "$repo:1.0" --sign-key "$work/builder.key" \
	--builder-id https://ci.example/interop --json >"$work/build.json"
digest=$(jq -r .digest "$work/build.json")
echo "pushed $repo@$digest"

step "cosign verify --key (offline)"
show "$cosign" verify --key "$work/builder.pub" --insecure-ignore-tlog=true --allow-insecure-registry "$repo@$digest" >"$work/verify.json"
jq -c '.[0].critical' "$work/verify.json"

for type in slsaprovenance1 cyclonedx; do
	step "cosign verify-attestation --type $type (offline)"
	show "$cosign" verify-attestation --key "$work/builder.pub" --type "$type" --insecure-ignore-tlog=true --allow-insecure-registry "$repo@$digest" >"$work/att-$type.json"
	jq -r '.payload' "$work/att-$type.json" | head -1 | base64 -d | jq -c '{predicateType, subject}'
done

step "cruxprov image verify (digests rehashed, signed repository checked)"
show "$bin" image verify "$repo@$digest" --key "$work/builder.pub"

step "a rebuild with nothing changed gives the same digest"
"$bin" image build --wheel "$echo" --index "http://127.0.0.1:$ip/simple/" --platform cp311-manylinux_2_36_x86_64 \
	--base "$base" --shim "$work/cruxshim" --output "oci:$work/out" --json >"$work/rebuild.json"
[ "$(jq -r .digest "$work/rebuild.json")" = "$digest" ] && echo "same digest $digest"

step "a second builder pushes the same digest under its own key: both signatures stand (cosign adds, never replaces)"
show "$bin" key generate --out "$work/builder2" --quiet
show "$bin" image build --wheel "$echo" --index "http://127.0.0.1:$ip/simple/" --platform cp311-manylinux_2_36_x86_64 \
	--base "$base" --shim "$work/cruxshim" --push "$repo:1.0" --sign-key "$work/builder2.key" \
	--builder-id https://ci.example/interop-2 --json >"$work/build2.json"
[ "$(jq -r .digest "$work/build2.json")" = "$digest" ] || { echo "interop: the second builder's digest differs" >&2; exit 1; }
for k in builder builder2; do
	show "$cosign" verify --key "$work/$k.pub" --insecure-ignore-tlog=true --allow-insecure-registry "$repo@$digest" >"$work/verify-$k.json"
	show "$cosign" verify-attestation --key "$work/$k.pub" --type slsaprovenance1 --insecure-ignore-tlog=true --allow-insecure-registry "$repo@$digest" >/dev/null
	show "$bin" image verify "$repo@$digest" --key "$work/$k.pub" --quiet
done

step "run --backend container: governance (approver root, builder key, interfaces), install --backend container, approve, verify, run with a secret on fd 3"
show "$bin" key generate --out "$work/alice" --quiet
show "$bin" key trust "$work/alice.pub" --name alice
cs=$("$bin" key trust "$work/builder.pub" --name ci --role builder --json | jq -r .changeSet.metadata.id)
show "$bin" changeset approve "$cs" --key "$work/alice.key" --quiet
show "$bin" interface register acme.echo --schema "$work/fx/interfaces/acme.echo.json" --quiet
show "$bin" interface register acme.diagnostics --schema "$work/fx/interfaces/acme.diagnostics.json" --quiet
cs=$(show "$bin" install "$echo" --index "http://127.0.0.1:$ip/simple/" --backend container --image "$repo@$digest" --python /usr/bin/python3.11 --json | jq -r .changeSet.metadata.id)
show "$bin" changeset approve "$cs" --key "$work/alice.key" --quiet
show "$bin" verify acme-echo --backend container --state-dir "$work/state"
printf 'interop-secret' >"$work/token"
echo '{"hello": "container"}' | show "$bin" run acme-echo echo --backend container --input - --secret acme/api-token=@"$work/token" \
	--state-dir "$work/state" --ledger "$work/state/receipts.jsonl" --json >"$work/run.json"
jq -c '{status, result, exit_code}' "$work/run.json"
[ "$(jq -r .status "$work/run.json")" = ok ] || { echo "interop: the container run did not succeed" >&2; exit 1; }
want=$(printf 'interop-secret' | sha256sum | cut -d' ' -f1)
[ "$(jq -r .result.secret_sha256 "$work/run.json")" = "$want" ] && echo "the provider read the secret from fd 3 (sha256 $want)"
tail -1 "$work/state/receipts.jsonl" | jq -c '{phase, status, attempt_id}'
"$bin" receipts list --ledger "$work/state/receipts.jsonl" --json | jq -c '.attempts[-1].intent | {backend, materialization_digest, platform}' 2>/dev/null || true
echo "interop: ok"
