#!/usr/bin/env bash
# A rootless container run against a local run of the same provider, side by side
# (docs/executor.md, "Rootless", "Overhead of a container run"): the fixture acme-echo, its
# image built from the bookworm base and signed by a throwaway builder key into a layout, both
# installed and approved by the rootless user ($ROOTLESS_USER, default cruxprov-rootless: the
# one .ci/run sets up), who then times, alternating, RUNS times (default 7):
#
#   local       cruxprov run acme-echo echo --secret …                (the sealed venv)
#   container   cruxprov run acme-echo echo --secret … --backend container
#               (plus --unenforced-limits where rootless podman cannot apply the cgroup limits,
#               cgroups v1; the image already in the user's podman storage: pulled by a first run)
#
# and prints the medians (ms) and their ratio. Each run verifies its pin from scratch, writes its
# intent and outcome to its ledger, and gets its secret on fd 3; the container run also verifies
# the image's digest, signature and provenance. Skipped, saying why, where rootless podman cannot
# run (not root to switch users, no such user with subordinate ids, podman, runc, setpriv or
# newuidmap missing, podman refusing as that user) or no base image can be made (mmdebstrap,
# umoci: the base is cached in $TMPDIR as image.sh's).
# Usage: bench/container.sh   (env: RUNS, ROOTLESS_USER, CRUXPROV=path to a built binary,
#                              KEEP=1 keeps the work directory, to time other builds by hand)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-7}
RL=${ROOTLESS_USER:-cruxprov-rootless}
PY=/usr/bin/python3.11
skip() { echo "container.sh: $*; skipped"; exit 0; }
[ "$(id -u)" = 0 ] || skip "not root: it runs the CLI as the rootless user $RL with setpriv"
[ -x "$PY" ] || skip "no $PY (the local env's and the base's interpreter)"
for t in podman runc setpriv newuidmap newgidmap mmdebstrap umoci jq; do
	command -v $t >/dev/null || skip "$t is not installed"
done
id "$RL" >/dev/null 2>&1 || skip "no user $RL (.ci/run creates it)"
grep -q "^$RL:" /etc/subuid && grep -q "^$RL:" /etc/subgid || skip "$RL has no subordinate ids in /etc/subuid and /etc/subgid"
RLHOME=$(getent passwd "$RL" | cut -d: -f6)
as() { # as CMD...: CMD as the rootless user, in its own directory
	(cd "$W/user" && setpriv --reuid "$RL" --regid "$RL" --init-groups env -i HOME="$RLHOME" USER="$RL" LOGNAME="$RL" \
		PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin XDG_STATE_HOME="$W/user/state" \
		CRUXPROV_KEY_PASSWORD=bench "$@")
}

export SOURCE_DATE_EPOCH=1700000000 CRUXPROV_KEY_PASSWORD=bench
. bench/lib/common.sh
bench_setup container
mkdir -m 755 "$W/user"
chown "$RL:" "$W/user"
rootless=$(as podman --runtime runc info --format '{{.Host.Security.Rootless}}' 2>"$W/why") && [ "$rootless" = true ] ||
	skip "rootless podman does not run as $RL: $(tail -1 "$W/why")"
bench_base
CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -ldflags=-buildid= -o "$W/cruxshim" ./cmd/cruxshim

# CI's side, as root: the fixture wheels on a loopback index, the image built, signed, in a layout.
go run ./internal/fixtures/cmd -out "$W/fx" >/dev/null
"$BIN" --home "$W/ci" index build "$W/index" --from "$W/fx/wheels" --quiet
bench_serve "$W/index"
INDEX=http://127.0.0.1:$PORT/simple/
ECHO=$(ls "$W"/fx/wheels/acme_echo-*.whl)
"$BIN" --home "$W/ci" key generate --out "$W/builder" --quiet
D=$("$BIN" --home "$W/ci" image build --wheel "$ECHO" --index "$INDEX" --platform cp311-manylinux_2_36_x86_64 \
	--base "$BASE" --shim "$W/cruxshim" --output "oci:$W/img" --sign-key "$W/builder.key" \
	--repo localhost/acme/echo --builder-id https://bench.example/builder --quiet)
chmod -R a+rX "$W/img" "$W/fx" "$W/builder.pub"

# The rootless user's side: a home per backend, each with its approver key, the interfaces and
# the provider installed and approved.
printf '{"hello": "world"}' >"$W/user/in.json"
printf 'bench-token' >"$W/user/token"
chown "$RL:" "$W/user/in.json" "$W/user/token"
for b in local container; do
	cx() { as "$BIN" --home "$W/user/$b" "$@"; }
	cx key generate --out "$W/user/alice-$b" --quiet
	cx key trust "$W/user/alice-$b.pub" --name alice --quiet
	for i in acme.echo acme.diagnostics; do
		cx interface register $i --schema "$W/fx/interfaces/$i.json" --quiet
	done
	if [ $b = container ]; then
		cs=$(cx key trust "$W/builder.pub" --name ci --role builder --quiet)
		cx changeset approve "$cs" --key "$W/user/alice-$b.key" --quiet
		cs=$(cx install "$ECHO" --index "$INDEX" --backend container --image "oci:$W/img@$D" --python "$PY" --quiet)
	else
		cs=$(cx install "$ECHO" --index "$INDEX" --platform host --python "$PY" --quiet)
	fi
	cx changeset approve "$cs" --key "$W/user/alice-$b.key" --quiet
done
run_local() { as "$BIN" --home "$W/user/local" run acme-echo echo --input "$W/user/in.json" --secret "acme/api-token=@$W/user/token" >/dev/null; }
CFLAGS=(--backend container)
run_container() { as "$BIN" --home "$W/user/container" run acme-echo echo --input "$W/user/in.json" --secret "acme/api-token=@$W/user/token" "${CFLAGS[@]}" >/dev/null; }
run_local
# The first container run pulls the image into the user's podman storage; a podman that cannot
# apply the cgroup limits (cgroups v1) refuses without --unenforced-limits.
if ! out=$(run_container 2>&1); then
	grep -q -- '--unenforced-limits' <<<"$out" || { echo "container.sh: the container run failed: $out" >&2; exit 1; }
	CFLAGS+=(--unenforced-limits)
	echo "rootless podman cannot apply the cgroup limits here: runs with --unenforced-limits"
	run_container
fi
# The image, by its config digest (podman's id), out of the user's storage at the end; not
# --force: a container of it left would be a failure to see.
CID=$(jq -r .config.digest "$W/img/blobs/sha256/${D#sha256:}")
trap 'as podman --runtime runc rmi --ignore "${CID#sha256:}" >/dev/null 2>&1 || true; bench_cleanup' EXIT
if [ -n "${KEEP:-}" ]; then
	trap - EXIT
	[ -z "$SERVER" ] || kill "$SERVER"
	echo "kept $W (the run commands: $W/user/run-*.sh, as $RL)"
	printf '#!/bin/sh\nexec "${CRUXPROV:-%s}" --home %s/user/local run acme-echo echo --input %s/user/in.json --secret acme/api-token=@%s/user/token >/dev/null\n' "$BIN" "$W" "$W" "$W" >"$W/user/run-local.sh"
	printf '#!/bin/sh\nexec "${CRUXPROV:-%s}" --home %s/user/container run acme-echo echo --input %s/user/in.json --secret acme/api-token=@%s/user/token %s >/dev/null\n' "$BIN" "$W" "$W" "$W" "${CFLAGS[*]}" >"$W/user/run-container.sh"
	chmod 755 "$W/user"/run-*.sh
fi

now() { date +%s%N; }
med() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
: >"$W/t.local"
: >"$W/t.container"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores; $RUNS rounds, as $RL ($(as podman --runtime runc info --format '{{.Host.CgroupsVersion}}' 2>/dev/null), $(as podman --runtime runc info --format '{{.Store.GraphDriverName}}' 2>/dev/null) storage)"
for _ in $(seq "$RUNS"); do
	s=$(now); run_local; e=$(now); echo $(((e - s) / 1000000)) >>"$W/t.local"
	s=$(now); run_container; e=$(now); echo $(((e - s) / 1000000)) >>"$W/t.container"
done
echo "load after:  $(cut -d' ' -f1-3 /proc/loadavg)"
echo "local (ms):     $(tr '\n' ' ' <"$W/t.local")"
echo "container (ms): $(tr '\n' ' ' <"$W/t.container")"
L=$(med <"$W/t.local")
C=$(med <"$W/t.container")
printf '%-52s %8s ms\n' "cruxprov run (local, sealed venv)" "$L" "cruxprov run --backend container (rootless)" "$C"
awk -v c="$C" -v l="$L" 'BEGIN {printf "container / local: %.2fx\n", c/l}'
