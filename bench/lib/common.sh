# Sourced by bench/*.sh (not a benchmark itself: make bench runs bench/*.sh only).
#
#   bench_setup NAME   a work directory $W under $BENCH_TMPDIR (default /tmp: set it to measure
#                      on another file system), removed on exit, with the loopback server
#                      $SERVER a script starts killed; and $BIN: $CRUXPROV, or cruxprov built into $W
#   bench_free_port    prints a free TCP port of 127.0.0.1
#   bench_serve DIR [PORT]
#                      serves DIR on 127.0.0.1:$PORT (PORT, or a free port) as $SERVER and
#                      waits until /simple/ answers
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
