# Sourced by bench/*.sh (not a benchmark itself: make bench runs bench/*.sh only).
#
#   bench_setup NAME   a work directory $W under $BENCH_TMPDIR (default /tmp: set it to measure
#                      on another file system), removed on exit, with the loopback server
#                      $SERVER a script starts killed; and $BIN: $CRUXPROV, or cruxprov built into $W
#   bench_free_port    prints a free TCP port of 127.0.0.1
#   bench_serve DIR [PORT]
#                      serves DIR on 127.0.0.1:$PORT (PORT, or a free port) as $SERVER and
#                      waits until /simple/ answers
#   bench_check_corpus PY SIZE [RUNTIME]
#                      stops the script (exit 1, measuring nothing) unless $W/corpus, packed
#                      from PY, is the corpus SIZE names (bench/lib/check-corpus.py; RUNTIME=1:
#                      the fixtures' runtime wheel in it too); prints one line when it is
#   bench_cold_home    (after bench_setup, with $PY and $MAKE_CORPUS) builds the corpus
#                      ($CORPUS_SIZE, default medium) into $W/corpus, serves it, and makes the
#                      home $H whose cold creates the scripts time: $BIN creates the env once
#                      with --no-compile (the fetch and the probe cache), then the env and the
#                      pyc cache are removed; ${args[@]} is that create's command line
#   bench_base         sets $BASE to the bookworm base image (python3-minimal) as oci:DIR@DIGEST,
#                      made by mmdebstrap and umoci once ($SOURCE_DATE_EPOCH) and cached in $TMPDIR
#                      as make interop's
bench_setup() {
	W=$(mktemp -d "${BENCH_TMPDIR:-/tmp}/cruxprov-bench-$1.XXXXXX")
	chmod 755 "$W"
	SERVER=
	trap bench_cleanup EXIT
	BIN=${CRUXPROV:-}
	if [ -z "$BIN" ]; then
		BIN="$W/cruxprov"
		CGO_ENABLED=0 go build -trimpath -tags urfave_cli_no_docs -ldflags=-buildid= -o "$BIN" ./cmd/cruxprov
	fi
}

bench_cleanup() {
	if [ -n "${SERVER:-}" ]; then kill "$SERVER" 2>/dev/null || true; fi
	chmod -R u+w "$W" 2>/dev/null || true
	rm -rf "$W"
}

bench_free_port() {
	python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'
}

bench_serve() {
	PORT=${2:-$(bench_free_port)}
	python3 -m http.server "$PORT" --bind 127.0.0.1 -d "$1" >/dev/null 2>&1 &
	SERVER=$!
	for _ in $(seq 50); do curl -fs "http://127.0.0.1:$PORT/simple/" >/dev/null && break; sleep 0.1; done
}

bench_check_corpus() {
	"$1" bench/lib/check-corpus.py "$(basename "$0")" "$MAKE_CORPUS" "$W/corpus" "$2" "${3:-0}" || exit 1
}

bench_cold_home() {
	"$PY" "$MAKE_CORPUS" --out "$W/corpus" --size "${CORPUS_SIZE:-medium}" --python "$PY" | tail -1
	bench_check_corpus "$PY" "${CORPUS_SIZE:-medium}"
	bench_serve "$W/corpus"
	ROOT=$(ls "$W"/corpus/files/bench_provider-*.whl)
	H=$W/home
	args=(--home "$H" env create --wheel "$ROOT" --platform host --python "$PY" --index "http://127.0.0.1:$PORT/simple/")
	"$BIN" "${args[@]}" --no-compile --json >/dev/null
	chmod -R u+w "$H/envs" 2>/dev/null || true
	rm -rf "$H"/envs/[0-9a-f]* "$H/cache/pyc"
}

bench_base() {
	local cache=${TMPDIR:-/tmp}/cruxprov-interop-base-$SOURCE_DATE_EPOCH
	if [ ! -f "$cache/digest" ]; then
		echo "base: mmdebstrap bookworm (once, cached in $cache)"
		rm -rf "$cache" && mkdir -p "$cache"
		mmdebstrap --quiet --variant=essential --include=python3-minimal,libpython3.11-stdlib bookworm "$cache/base.tar"
		umoci init --layout "$cache/oci" && umoci new --image "$cache/oci:base"
		umoci raw add-layer --image "$cache/oci:base" "$cache/base.tar" && rm "$cache/base.tar"
		jq -r '.manifests[] | select(.annotations["org.opencontainers.image.ref.name"]=="base") | .digest' "$cache/oci/index.json" >"$cache/digest"
		chmod -R a+rX "$cache"
	fi
	BASE="oci:$cache/oci@$(cat "$cache/digest")"
}
