#!/usr/bin/env bash
# Tree digest (treehash.Walk, 2 workers) against its peer,
# `find . -type f -print0 | xargs -0 -P2 sha256sum`, over the same generated
# tree (2000 small files in nested packages and 8 files of 4 MiB, ~44 MB, in
# the page cache). Runs are interleaved; prints each side's median wall time
# and the ratio WalkTree/peer (the target is <= 1.3).
# DIGEST_BENCH_ROOT=<dir> benchmarks an existing tree instead; RUNS=<n>.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-7}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go test -c -o "$tmp/treehash.test" ./treehash/
one() { # benchmark name regexp -> ns/op
	"$tmp/treehash.test" -test.run '^$' -test.bench "$1" -test.benchtime 3x -test.count 1 |
		awk '/ns\/op/ { for (i = 1; i <= NF; i++) if ($(i+1) == "ns/op") print $i }'
}
for i in $(seq "$runs"); do
	one 'BenchmarkWalkTree/jobs=2$' >>"$tmp/walk"
	one 'BenchmarkFindSha256sum$' >>"$tmp/peer"
done
median() { sort -n "$1" | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
w=$(median "$tmp/walk")
p=$(median "$tmp/peer")
awk -v w="$w" -v p="$p" -v n="$runs" 'BEGIN {
	printf "tree digest over the same tree, median of %d runs\n", n
	printf "  treehash.Walk jobs=2              %8.1f ms\n", w / 1e6
	printf "  find | xargs -P2 sha256sum         %8.1f ms\n", p / 1e6
	printf "  ratio WalkTree/peer                %8.2f (target <= 1.30)\n", w / p
}'
