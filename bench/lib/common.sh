# Sourced by bench/*.sh (not a benchmark itself: make bench runs bench/*.sh only).
#
#   bench_setup NAME   a work directory $W (removed on exit, with the loopback server $SERVER
#                      a script starts killed), and $BIN: $CRUXPROV, or cruxprov built into $W
bench_setup() {
	W=$(mktemp -d "/tmp/cruxprov-bench-$1.XXXXXX")
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
