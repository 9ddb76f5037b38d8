#!/usr/bin/env bash
# image build on a warm store (wheels fetched), for the --size medium corpus of real wheels
# (../shared/bench/make-corpus.py, with the fixtures' runtime wheel), on a bookworm base.
# make-corpus.py packs the distributions CORPUS_PYTHON (default: the python3 on PATH) has
# installed, and medium is 30 named ones and the runtime wheel, 31 wheels; an interpreter without
# some of them gives a smaller corpus (Debian's python3: 6 wheels), so the corpus built is checked
# against make-corpus.py's list for CORPUS_SIZE first, and the script stops, measuring nothing and
# naming what is missing, when any is not in it (CORPUS_CHECK_ONLY=1 stops after that check).
#
#   1. the whole `image build --offline --output oci:NEW`  vs  tar -c of the same env tree | gzip -6
#      (target: no slower than the pipe); and the layer writing alone (the build's layers_ns)
#   2. the env layer's size  vs  the tar | gzip -6 output's size
#   3. a rebuild with nothing changed (the same layout: every blob is there already, and the env
#      layer in the store's layer cache); the whole builds run with that cache emptied first
#
# Each runs RUNS times (default 5); medians are printed, with the load average before and after.
# Needs mmdebstrap and umoci for the base (cached in $TMPDIR like make interop's); skipped otherwise.
# Usage: bench/image.sh   (env: RUNS, CORPUS_SIZE, CORPUS_PYTHON, CORPUS_CHECK_ONLY=1,
#   CRUXPROV=path to a built binary)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-5}
SIZE=${CORPUS_SIZE:-medium}
CORPUS_PY=${CORPUS_PYTHON:-python3}
PY=/usr/bin/python3.11
MAKE_CORPUS=${MAKE_CORPUS:-../shared/bench/make-corpus.py}
[ -f "$MAKE_CORPUS" ] || { echo "image.sh: no $MAKE_CORPUS; skipped"; exit 0; }
[ -x "$PY" ] || { echo "image.sh: no $PY (the base's interpreter must exist on the host); skipped"; exit 0; }
for t in mmdebstrap umoci jq; do command -v $t >/dev/null || { echo "image.sh: $t missing; skipped"; exit 0; }; done
export SOURCE_DATE_EPOCH=1700000000
. bench/lib/common.sh

bench_setup img
go run ./internal/fixtures/cmd -out "$W/fx" >/dev/null
echo "corpus: $SIZE (building it with $MAKE_CORPUS from what $CORPUS_PY has installed)"
"$CORPUS_PY" "$MAKE_CORPUS" --out "$W/corpus" --size "$SIZE" --python "$CORPUS_PY" \
	--runtime-wheel "$(ls "$W"/fx/wheels/cruxible_provider_runtime-*.whl)" | tail -1
bench_check_corpus "$CORPUS_PY" "$SIZE" 1
[ "${CORPUS_CHECK_ONLY:-}" = 1 ] && exit 0

CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -ldflags=-buildid= -o "$W/cruxshim" ./cmd/cruxshim
bench_base
bench_serve "$W/corpus"
ROOT=$(ls "$W"/corpus/files/bench_provider-*.whl)
PLAT=cp311-manylinux_2_36_x86_64

build() { # build OUT [flags] -> JSON
	local out=$1; shift
	"$BIN" --home "$W/home" image build --wheel "$ROOT" --platform "$PLAT" --base "$BASE" --shim "$W/cruxshim" \
		--index "http://127.0.0.1:$PORT/simple/" --output "oci:$out" --json "$@"
}
build "$W/warm" >/dev/null # fetch every wheel: the store is warm from here on

# The env tree of the image, for the peer: the env layer unpacked.
ENVBLOB=$(jq -r '.manifests[] | select(.annotations["org.opencontainers.image.ref.name"]=="bench-provider") | .digest' "$W/warm/index.json")
MAN="$W/warm/blobs/sha256/${ENVBLOB#sha256:}"
LAYER=$(jq -r '.layers[-3].digest' "$MAN")
mkdir "$W/tree" && tar -xzf "$W/warm/blobs/sha256/${LAYER#sha256:}" -C "$W/tree"
FILES=$(find "$W/tree" -type f | wc -l)

med() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
now() { date +%s%N; }
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
: >"$W/t.build"; : >"$W/t.layers"; : >"$W/t.mat"; : >"$W/t.pipe"; : >"$W/t.rebuild"
for i in $(seq "$RUNS"); do
	rm -rf "$W/home/cache/image-layers-v1" # a whole build: the env materialized and compressed
	s=$(now); build "$W/out$i" --offline >"$W/b.json"; e=$(now)
	echo $(((e - s) / 1000000)) >>"$W/t.build"
	echo $(($(jq -r .timings.layers_ns "$W/b.json") / 1000000)) >>"$W/t.layers"
	echo $(($(jq -r .timings.materialize_ns "$W/b.json") / 1000000)) >>"$W/t.mat"
	s=$(now); build "$W/out$i" --offline >/dev/null; e=$(now)
	echo $(((e - s) / 1000000)) >>"$W/t.rebuild"
	rm -rf "$W/out$i"
	s=$(now); tar -c -C "$W/tree" . | gzip -6 >"$W/peer.tar.gz"; e=$(now)
	echo $(((e - s) / 1000000)) >>"$W/t.pipe"
done
echo "load after:  $(cut -d' ' -f1-3 /proc/loadavg)"
echo "whole builds (ms): $(tr '\n' ' ' <"$W/t.build")  peer (ms): $(tr '\n' ' ' <"$W/t.pipe")"
B=$(med <"$W/t.build"); L=$(med <"$W/t.layers"); M=$(med <"$W/t.mat"); P=$(med <"$W/t.pipe"); R=$(med <"$W/t.rebuild")
ENVSIZE=$(stat -c %s "$W/warm/blobs/sha256/${LAYER#sha256:}")
PEERSIZE=$(stat -c %s "$W/peer.tar.gz")
printf 'env tree: %d files, %s bytes unpacked\n' "$FILES" "$(du -sb "$W/tree" | cut -f1)"
printf '%-52s %8s ms\n' "image build --offline (whole, fresh layout)" "$B" \
	"  its materialization (env tree, warm bytecode cache)" "$M" \
	"  its layer writing (env+shim+metadata)" "$L" \
	"tar -c ENV | gzip -6 (peer)" "$P" \
	"rebuild, nothing changed (same layout)" "$R"
awk -v b="$B" -v p="$P" -v l="$L" 'BEGIN {printf "whole build / peer: %.2fx   layers / peer: %.2fx   (target: whole <= 1.0x)\n", b/p, l/p}'
awk -v a="$ENVSIZE" -v b="$PEERSIZE" 'BEGIN {printf "env layer %d bytes vs tar|gzip -6 %d bytes: %.3fx\n", a, b, a/b}'
