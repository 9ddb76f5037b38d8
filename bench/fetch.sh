#!/usr/bin/env bash
# Fetch benchmark (issue 5, DESIGN §12): the medium corpus of
# ../shared/bench/make-corpus.py (30 real wheels, ~27 MB) served by a
# loopback static server, fetched into an empty store by `cruxprov fetch`
# (project pages read from the pinned index, sha256 and size checked while
# streaming, blobs fsynced then renamed) against `curl --parallel` of the
# same URLs to disk followed by `sync` (the same durability). Alternating
# runs; prints the medians and the ratio (target: within 1.25x).
#
#   RUNS=N     runs of each (default 7)
#   JOBS=N     parallel downloads for both (default 6, cruxprov's default)
#   SERVER=go|python   the static server (default go: net/http's FileServer,
#              as nginx or a bucket would serve; python: python3 -m http.server)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
shared="$here/../../shared"
if [ ! -f "$shared/bench/make-corpus.py" ]; then
  echo "fetch.sh: skipped: $shared/bench/make-corpus.py is absent"; exit 0
fi
for tool in curl python3 go; do
  command -v "$tool" >/dev/null || { echo "fetch.sh: skipped: no $tool"; exit 0; }
done
RUNS=${RUNS:-7}
JOBS=${JOBS:-6}
SERVER=${SERVER:-go}
work=$(mktemp -d "${TMPDIR:-/tmp}/cruxprov-bench-fetch.XXXXXX")
srv_pid=
cleanup() { [ -n "$srv_pid" ] && kill "$srv_pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 "$shared/bench/make-corpus.py" --out "$work/corpus" --size medium --index-url "http://127.0.0.1:$port/simple/" >"$work/corpus.log"
tail -n 1 "$work/corpus.log"

# Built here, not taken from bin/: the benchmark measures this tree.
bin="$work/cruxprov"
(cd "$repo" && CGO_ENABLED=0 go build -trimpath -tags urfave_cli_no_docs -o "$bin" ./cmd/cruxprov)

case "$SERVER" in
  go)
    mkdir -p "$work/srv"
    printf 'package main\n\nimport (\n\t"net/http"\n\t"os"\n)\n\nfunc main() { panic(http.ListenAndServe(os.Args[1], http.FileServer(http.Dir(os.Args[2])))) }\n' >"$work/srv/main.go"
    printf 'module benchsrv\n\ngo 1.26\n' >"$work/srv/go.mod"
    (cd "$work/srv" && go build -o srv .)
    "$work/srv/srv" "127.0.0.1:$port" "$work/corpus" & srv_pid=$! ;;
  python)
    python3 -m http.server --bind 127.0.0.1 --directory "$work/corpus" "$port" >/dev/null 2>&1 & srv_pid=$! ;;
  *) echo "fetch.sh: SERVER must be go or python" >&2; exit 64 ;;
esac
for _ in $(seq 50); do curl -sf -o /dev/null "http://127.0.0.1:$port/simple/" && break; sleep 0.1; done

# The very URLs the lock names, for curl.
grep '^url = ' "$work/corpus/pylock.toml" | sed 's/^url = "\(.*\)"$/\1/' >"$work/urls"
n=$(wc -l <"$work/urls")
while read -r u; do printf 'url = "%s"\noutput = "%s"\n' "$u" "${u##*/}"; done <"$work/urls" >"$work/curl.cfg"
py=$(python3 -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
plat="$py-manylinux_2_36_$(uname -m)"
index="http://127.0.0.1:$port/simple/"

run_cruxprov() {
  rm -rf "$work/home"
  local t0=$EPOCHREALTIME
  "$bin" fetch --lock "$work/corpus/pylock.toml" --platform "$plat" --index "$index" --home "$work/home" --jobs "$JOBS" --quiet --no-progress >/dev/null
  local t1=$EPOCHREALTIME
  [ "$(ls "$work/home/blobs/sha256" | wc -l)" -eq "$n" ] || { echo "cruxprov stored the wrong number of blobs" >&2; exit 1; }
  echo "$t1 - $t0" | bc -l >>"$work/t.cruxprov"
}
run_curl() {
  rm -rf "$work/dl"; mkdir "$work/dl"
  local t0=$EPOCHREALTIME
  (cd "$work/dl" && curl -sSf --no-progress-meter --parallel --parallel-max "$JOBS" -K "$work/curl.cfg") && sync
  local t1=$EPOCHREALTIME
  [ "$(ls "$work/dl" | wc -l)" -eq "$n" ] || { echo "curl fetched the wrong number of files" >&2; exit 1; }
  echo "$t1 - $t0" | bc -l >>"$work/t.curl"
}
command -v bc >/dev/null || { echo "fetch.sh: skipped: no bc"; exit 0; }

run_cruxprov; run_curl; : >"$work/t.cruxprov"; : >"$work/t.curl" # warm-up: page cache and binaries
for i in $(seq "$RUNS"); do
  if [ $((i % 2)) -eq 1 ]; then run_cruxprov; run_curl; else run_curl; run_cruxprov; fi
done
# After a fetch, --offline serves everything from the store.
"$bin" fetch --lock "$work/corpus/pylock.toml" --platform "$plat" --home "$work/home" --offline --quiet >/dev/null

median() { sort -n "$1" | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
mc=$(median "$work/t.cruxprov"); mu=$(median "$work/t.curl")
echo "fetch: $n wheels, $RUNS alternating runs, $JOBS parallel, $SERVER static server on loopback"
printf '  cruxprov fetch (pages, verify, fsync, rename)  median %.3f s   runs: %s\n' "$mc" "$(sort -n "$work/t.cruxprov" | awk '{printf "%.3f ", $1}')"
printf '  curl --parallel + sync                         median %.3f s   runs: %s\n' "$mu" "$(sort -n "$work/t.curl" | awk '{printf "%.3f ", $1}')"
awk -v a="$mc" -v b="$mu" 'BEGIN {printf "  ratio cruxprov/curl %.2fx (target <= 1.25x)\n", a/b}'
