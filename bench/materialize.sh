#!/usr/bin/env bash
# Materialize and verify vs their peers, on the --size medium corpus of real wheels
# (../shared/bench/make-corpus.py: ~30 wheels, ~3,900 files, ~70 MB installed).
#
#   1. env create from a warm store  vs  python -m venv --without-pip + pip install --no-index
#      --no-deps --require-hashes, both with bytecode and both --no-compile (target: >= 8x faster);
#      with bytecode twice: the store's pyc cache (cache/pyc) deleted first (cold), and warm;
#      the cold one also against its own compile processes' CPU time (user+sys, from the
#      create's timings) divided by the cores (target: <= 1.15x: everything but compiling,
#      probe, install, seal and process starts, is hidden under the compiling), with cruxprov's
#      own CPU in that create (user+sys of the create, from /usr/bin/time, minus its compile
#      processes'): what two cores cannot hide under a compile that already fills them. The
#      row divides the medians; the line below it gives each cold create against its own
#      compile CPU, and then the core-ms the machine was idle, the hypervisor stole and other
#      processes took in each (with cruxprov's own CPU, the parts of the ratio above 1);
#      as root, each round also makes one cold create with the home on a tmpfs mounted for it:
#      the same create without the disk file system's work, so the difference of the two
#      ratios is that file system's share (TMPFS=0 leaves it out); and the Go collector's
#      collections and CPU in each cold create, with one more cold create at Go's default
#      GOGC=100 for the gain of the command's GOGC=400; one more cold and one more warm create with
#      GODEBUG=disablethp=1 for the gain of the tricks against page faults (the heap's huge pages, the
#      compile processes' malloc settings); and the physical limit besides compiling:
#      the CPU of writing that env's tree alone from memory (materialize's BenchmarkTreeWriteFloor,
#      one thread, nothing else), against the compile CPU
#   2. env create --no-compile (seal included)  vs  cp -a of the finished env (target: <= 1.5x)
#   3. env verify (fast)  vs  find ENV -printf '%s %T@\n'  (target: <= 1.5x)
#   4. env verify --deep  vs  find ENV -type f -print0 | xargs -0 -P2 sha256sum  (target: <= 1.3x)
#
# Each pair runs alternately RUNS times (default 7, at least 5); medians and ratios are printed,
# with the load average before and after (the figures are only as quiet as the machine).
# Usage: bench/materialize.sh   (env: RUNS, PYTHON, CORPUS_SIZE, CRUXPROV=path to a built binary,
#   TMPFS=0 to leave out the tmpfs creates, BENCH_TMPDIR=a directory on the file system to measure)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-7}
PY=${PYTHON:-/root/.pyenv/versions/3.11.7/bin/python3.11}
SIZE=${CORPUS_SIZE:-medium}
MAKE_CORPUS=${MAKE_CORPUS:-../shared/bench/make-corpus.py}
[ -f "$MAKE_CORPUS" ] || { echo "materialize.sh: no $MAKE_CORPUS; skipped"; exit 0; }
[ -x "$PY" ] || PY=$(command -v python3)
PY=$("$PY" -c 'import os,sys;print(os.path.realpath(sys.executable))')

. bench/lib/common.sh
bench_setup mat

echo "corpus: $SIZE (building it with $MAKE_CORPUS)"
"$PY" "$MAKE_CORPUS" --out "$W/corpus" --size "$SIZE" --python "$PY" | tail -1
bench_check_corpus "$PY" "$SIZE"
bench_serve "$W/corpus"

HOME_=$W/home
ROOT=$(ls "$W"/corpus/files/bench_provider-*.whl)
# pip's inputs: every wheel with its hash (the root wheel included, as cruxprov installs it too)
: >"$W/req.txt"
for f in "$W"/corpus/files/*.whl; do
  echo "$f --hash=sha256:$(sha256sum "$f" | cut -d' ' -f1)" >>"$W/req.txt"
done

# timed CMD...: runs CMD, and writes its CPU time (user+sys, its children's
# included) in ns to $W/cpu when /usr/bin/time is there (else leaves it empty)
timed() {
  : >"$W/cpu"
  if [ -x /usr/bin/time ]; then
    /usr/bin/time -f '%U %S' -o "$W/cpu.raw" "$@" || return
    awk '{printf "%.0f\n", ($1 + $2) * 1e9}' "$W/cpu.raw" >"$W/cpu"
  else
    "$@"
  fi
}
create() { # create [--no-compile] -> prints the JSON (and its CPU time, see timed); H=home
  timed "$BIN" --home "${H:-$HOME_}" env create --wheel "$ROOT" --platform host --python "$PY" \
    --index "http://127.0.0.1:$PORT/simple/" --offline --json "$@"
}
rm_env() { # rm_env [HOME]
  chmod -R u+w "${1:-$HOME_}/envs" 2>/dev/null || true
  rm -rf "${1:-$HOME_}"/envs/[0-9a-f]*
}
now() { date +%s%N; }
# selfratio WALL_NS JSON: a create's wall clock against its own compile CPU / cores, x 10,000
selfratio() {
  jq -r --argjson c "$CORES" --argjson w "$1" \
    'if (.timings.compile_cpu_ns // 0) > 0 then 1e4 * $w / (.timings.compile_cpu_ns / $c) | floor else 0 end' <<<"$2"
}
# gcstat FILE: the collections a run's GODEBUG=gctrace=1 lines report, and their CPU (ns:
# the stop-the-world phases and the assist, background and idle marking)
gcstat() {
  awk '/^gc [0-9]+ @/ {n++; sub(/.* ms clock, /, ""); sub(/ ms cpu.*/, ""); gsub(/[+\/]/, " ");
    for (i = 1; i <= NF; i++) c += $i} END {printf "%d %d\n", n, c * 1e6}' "$1"
}
# gcfail: a create whose stderr went to $W/gc.txt failed: show what it said, and stop
gcfail() { cat "$W/gc.txt" >&2; echo "materialize.sh: env create failed" >&2; exit 1; }
# cpustat: the machine's idle, steal and busy time (user, nice, system, irq, softirq: ms of any
# core, /proc/stat's 10 ms ticks) so far
cpustat() { awk '/^cpu / {print ($5 + $6) * 10, $9 * 10, ($2 + $3 + $4 + $7 + $8) * 10}' /proc/stat; }

# Warm the store (the fetch) and the interpreter probe cache.
"$BIN" --home "$HOME_" env create --wheel "$ROOT" --platform host --python "$PY" \
  --index "http://127.0.0.1:$PORT/simple/" --no-compile --json >/dev/null
rm_env

# The file system's share: a second home on a tmpfs (memory only: no block or inode allocator,
# no page to write back), as root only, and where mounting is allowed.
TMPH=
if [ "${TMPFS:-1}" = 1 ] && [ "$(id -u)" = 0 ] && mkdir "$W/tmpfs" &&
  mount -t tmpfs -o size=4g,mode=0755 cruxprov-bench "$W/tmpfs" 2>/dev/null; then
  trap 'umount "$W/tmpfs" 2>/dev/null || true; bench_cleanup' EXIT
  TMPH=$W/tmpfs/home
  "$BIN" --home "$TMPH" env create --wheel "$ROOT" --platform host --python "$PY" \
    --index "http://127.0.0.1:$PORT/simple/" --no-compile --json >/dev/null
  rm_env "$TMPH"
else
  echo "tmpfs round skipped: needs root and a mountable tmpfs (TMPFS=${TMPFS:-1}, uid $(id -u))"
fi

declare -A T
add() { T[$1]="${T[$1]:-} $2"; }
median() { tr ' ' '\n' <<<"$1" | grep . | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
ms() { awk -v n="$1" 'BEGIN {printf "%.1f", n/1e6}'; }

pip_install() { # pip_install DIR [--no-compile]
  local d=$1; shift
  "$PY" -m venv --without-pip "$d"
  "$PY" -m pip --python "$d/bin/python" install --no-index --no-deps --require-hashes \
    --disable-pip-version-check -q "$@" -r "$W/req.txt"
}

# Fairness on ext4: creating files where inodes were freed seconds ago is slow
# (the allocator scans past them), and cruxprov's staging avoids it with a
# placement hint (docs/seal.md). So the peers get the same: each writes into a
# fresh directory under a parent marked `chattr +T`, and nothing they wrote is
# deleted until the end.
mkdir -p "$W/cpdst" "$W/pipdst"
chattr +T "$W/cpdst" "$W/pipdst" 2>/dev/null || true

# skipped ENV: how many inodes ext4 skipped in the block groups ENV's inodes are in: in each
# group, the inodes between the env's first and last there that are not the env's (inodes freed
# minutes ago, which the allocator scans past one by one: docs/seal.md, "Tricks"), summed; 0 when
# every group was fresh, "-" when the inodes per group are unknown (not ext4, or ambiguous:
# spread_linux.go's inodesPerGroup). The placement hint checks the group of the env's directory
# only; ext4 spreads the env's directories over the next few groups too. Blind spot: inodes
# skipped before the env's first inode in a group (a group the env spilled into, where an env
# removed a minute ago had begun) are not counted, though each allocation there pays for them
# (docs/seal.md, "The disk file system's share, measured", its sixteenth-session paragraph).
skipped() {
  [ "$(stat -f -c %T "$1")" = ext2/ext3 ] || { echo -; return; }
  "$PY" - "$1" <<'PYEOF'
import os, sys
s = os.statvfs(sys.argv[1]); per = s.f_bsize * 8
n = [g for g in range(-(-s.f_blocks // per), -(-(s.f_blocks + s.f_blocks // 12) // per) + 1) if s.f_files % g == 0]
if len(n) != 1:
    print("-"); sys.exit()
ipg = s.f_files // n[0]
mine = [os.lstat(sys.argv[1]).st_ino] + [os.lstat(os.path.join(r, x)).st_ino for r, ds, fs in os.walk(sys.argv[1]) for x in ds + fs]
groups = {}
for i in mine:
    groups.setdefault((i - 1) // ipg, []).append(i)
print(sum(max(v) - min(v) + 1 - len(v) for v in groups.values()))
PYEOF
}

CORES=$(nproc)
echo "running $RUNS alternating rounds… (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
for i in $(seq "$RUNS"); do
  for mode in coldpyc compile nocompile; do
    flag=(); [ $mode = nocompile ] && flag=(--no-compile)
    [ $mode = coldpyc ] && rm -rf "$HOME_/cache/pyc"   # every source compiled; "compile" then finds them cached
    rm_env; sync   # every timed run starts with nothing dirty (cp -a too)
    read -r i0 st0 b0 < <(cpustat)
    s=$(now); out=$(GODEBUG=gctrace=1 create "${flag[@]}" 2>"$W/gc.txt") || gcfail; e=$(now)
    read -r i1 st1 b1 < <(cpustat)
    [ $mode = coldpyc ] && read -r n c < <(gcstat "$W/gc.txt") && add gcn_coldpyc "$n" && add gccpu_coldpyc "$c"
    # What took the cores besides the creates' CPU: nothing (idle, and iowait), or the
    # hypervisor (steal: the VM's CPU given to other guests, wall clock no process is charged)
    [ $mode = coldpyc ] && add idle_coldpyc $((i1 - i0)) && add steal_coldpyc $((st1 - st0))
    # or other processes (kernel threads, this script): the machine's busy time less the create's
    [ $mode = coldpyc ] && [ -s "$W/cpu" ] && add other_coldpyc $((b1 - b0 - $(cat "$W/cpu") / 1000000))
    add "crux_$mode" $((e - s))
    [ -s "$W/cpu" ] && add "ccpu_$mode" "$(cat "$W/cpu")"
    add "install_$mode" "$(jq -r .timings.install_ns <<<"$out")"
    add "compile_$mode" "$(jq -r .timings.compile_ns <<<"$out")"
    add "seal_$mode" "$(jq -r .timings.seal_ns <<<"$out")"
    add "cpu_$mode" "$(jq -r '.timings.compile_cpu_ns // 0' <<<"$out")"
    [ $mode = coldpyc ] && add "cpucores_$mode" "$(jq -r --argjson c "$CORES" '(.timings.compile_cpu_ns // 0) / $c | floor' <<<"$out")"
    # and the create against its own compile CPU (x 10,000): the row's ratio divides medians
    # that may come from different creates
    [ $mode = coldpyc ] && add rcold "$(selfratio $((e - s)) "$out")"
    ENV=$(jq -r .path <<<"$out")
    if [ $mode = coldpyc ]; then
      add holes "$(skipped "$ENV")"
      if [ -n "$TMPH" ]; then   # the same cold create, its home on the tmpfs
        rm_env "$TMPH"; rm -rf "$TMPH/cache/pyc"; sync
        s=$(now); out=$(H=$TMPH create); e=$(now)
        add rtmpfs "$(selfratio $((e - s)) "$out")"
        [ -s "$W/cpu" ] && add owntmpfs "$(jq -r --argjson a "$(cat "$W/cpu")" \
          '1e4 * ($a - .timings.compile_cpu_ns) / .timings.compile_cpu_ns | floor' <<<"$out")"
        rm_env "$TMPH"
      fi
      continue   # its peer is the "compile" round's pip
    fi
    sync
    s=$(now); pip_install "$W/pipdst/env-$i-$mode" "${flag[@]}"; e=$(now)
    add "pip_$mode" $((e - s))
  done
  # the no-compile env is the one left: cp -a it, and verify it
  sync
  s=$(now); cp -a "$ENV" "$W/cpdst/copy-$i"; e=$(now); add cp $((e - s))
  s=$(now); "$BIN" --home "$HOME_" env verify "$ENV" >/dev/null; e=$(now); add verify $((e - s))
  s=$(now); find "$ENV" -printf '%s %T@\n' >/dev/null; e=$(now); add find $((e - s))
  s=$(now); "$BIN" --home "$HOME_" env verify --deep "$ENV" >/dev/null; e=$(now); add deep $((e - s))
  s=$(now); find "$ENV" -type f -print0 | xargs -0 -P2 sha256sum >/dev/null; e=$(now); add sha $((e - s))
done

FILES=$(find "$ENV" -type f | wc -l); BYTES=$(du -sb "$ENV" | cut -f1)
# The collector's setting (cmd/cruxprov/main.go: GOGC=400 unless the environment sets one), its
# gain shown: one more cold create at Go's default, GOGC=100, which is also how to turn it off.
rm_env; rm -rf "$HOME_/cache/pyc"; sync
s=$(now); out=$(GOGC=100 GODEBUG=gctrace=1 create 2>"$W/gc.txt") || gcfail; e=$(now)
read -r gcn100 gccpu100 < <(gcstat "$W/gc.txt")
r100=$(selfratio $((e - s)) "$out")
# The tricks against page faults (cmd/cruxprov/hugeheap_linux.go: the tree-building commands mark
# the start of their heap MADV_HUGEPAGE; materialize's compileTunables: the compile processes'
# malloc settings), their gain shown: one more cold create, and one more warm create, with
# GODEBUG=disablethp=1, which is also how to turn them off (scripts/cold-ab.sh pairs them for a
# figure less noisy than one run: ENV_A="GODEBUG=disablethp=1").
rm_env; rm -rf "$HOME_/cache/pyc"; sync
s=$(now); out=$(GODEBUG=disablethp=1 create 2>"$W/gc.txt") || gcfail; e=$(now)
rnothp=$(selfratio $((e - s)) "$out"); coldnothp=$(((e - s) / 1000000))
ownnothp=$([ -s "$W/cpu" ] && jq -r --argjson a "$(cat "$W/cpu")" '($a - .timings.compile_cpu_ns) / 1e6 | floor' <<<"$out" || echo -)
rm_env; sync
s=$(now); GODEBUG=disablethp=1 create >/dev/null 2>"$W/gc.txt" || gcfail; e=$(now)
warmnothp=$(((e - s) / 1000000))
# The physical limit besides compiling: the kernel's work of writing that env's tree (its pycs
# included) and nothing else, one thread, placed as a staging env is (materialize's
# BenchmarkTreeWriteFloor), the least of FLOORS trees: no installer of this tree needs less CPU.
# On the disk and, when mounted, on the tmpfs (no block or inode allocator: the disk's floor is
# as high as its allocator's state makes it, see the creates' inodes skipped).
FLOORS=$((RUNS > 5 ? RUNS : 5))
floor() { # floor TMPDIR: prints "least-cpu-ns files dirs bytes", or nothing (and why, on stderr)
  if ! CRUXPROV_FLOOR_ENV=$(jq -r .path <<<"$out") CRUXPROV_FLOOR_TMP=$1 \
    "$W/materialize.test" -test.run '^$' -test.bench TreeWriteFloor -test.benchtime "${FLOORS}x" >"$W/floor.txt"; then
    echo "floor in $1 failed: $(grep -v '^\(goos\|goarch\|pkg\|cpu\):' "$W/floor.txt" | head -3 | tr '\n' ' ')" >&2
    return 0
  fi
  awk '/^BenchmarkTreeWriteFloor/ {for (i = 2; i < NF; i++) {
      if ($(i + 1) == "min-cpu-ms") m = $i; if ($(i + 1) == "files") f = $i
      if ($(i + 1) == "dirs") d = $i; if ($(i + 1) == "bytes") b = $i}}
      END {if (m != "") printf "%.0f %d %d %d", m * 1e6, f, d, b}' "$W/floor.txt"
}
floordisk= floortmpfs=
if command -v go >/dev/null && go test -c -o "$W/materialize.test" ./materialize/ 2>"$W/floor.err"; then
  floordisk=$(floor "$HOME_/tmp")
  if [ -n "$TMPH" ]; then mkdir -p "$W/tmpfs/floor" && floortmpfs=$(floor "$W/tmpfs/floor"); fi
else
  echo "floor skipped: no Go toolchain to build materialize's benchmark ($(head -1 "$W/floor.err" 2>/dev/null))"
fi
rm_env

echo
echo "env: $FILES files, $((BYTES / 1048576)) MiB (no bytecode); medians of $RUNS runs, milliseconds"
row() { # row label a b target-description
  local a b; a=$(median "${T[$2]}"); b=$(median "${T[$3]}")
  awk -v l="$1" -v a="$a" -v b="$b" -v t="$4" 'BEGIN {printf "%-46s %9.1f %9.1f   ratio %6.2f   %s\n", l, a/1e6, b/1e6, a/b, t}'
}
printf "%-46s %9s %9s\n" "" "cruxprov" "peer"
row "create (bytecode) vs venv+pip install" crux_compile pip_compile "(target: ratio <= 0.125, i.e. >= 8x faster)"
row "create (bytecode, cold pyc cache) vs venv+pip" crux_coldpyc pip_compile "(first create on this interpreter)"
row "create (cold pyc cache) vs compile CPU / $CORES cores" crux_coldpyc cpucores_coldpyc "(target: ratio <= 1.15)"
row "create --no-compile vs venv+pip --no-compile" crux_nocompile pip_nocompile "(target: ratio <= 0.125)"
row "create --no-compile (sealed) vs cp -a" crux_nocompile cp "(target: ratio <= 1.5)"
row "env verify (fast) vs find -printf" verify find "(target: ratio <= 1.5)"
row "env verify --deep vs find|xargs -P2 sha256sum" deep sha "(target: ratio <= 1.3)"
echo
if [ -n "${T[ccpu_coldpyc]:-}" ]; then
  # What two cores cannot hide under a compile that fills them: cruxprov's own CPU.
  c=$(median "${T[ccpu_coldpyc]}"); p=$(median "${T[cpu_coldpyc]}")
  own=$(median "$(paste -d' ' <(tr ' ' '\n' <<<"${T[ccpu_coldpyc]}" | grep .) <(tr ' ' '\n' <<<"${T[cpu_coldpyc]}" | grep .) | awk '{print $1 - $2}' | tr '\n' ' ')")
  echo "create (coldpyc) CPU, medians: all $(ms "$c") ms, compile processes $(ms "$p") ms," \
    "cruxprov itself $(ms "$own") ms ($(awk -v a="$own" -v b="$p" 'BEGIN {printf "%.2f", a/b}') of the compile CPU)"
  if [ -n "$floordisk" ]; then
    read -r fcpu ffiles fdirs fbytes <<<"$floordisk"
    echo "writing the env's tree alone ($ffiles files, $fdirs directories, $((fbytes / 1048576)) MiB from memory," \
      "one thread, nothing else; the least of $FLOORS): $(ms "$fcpu") ms of CPU, $(awk -v a="$fcpu" -v b="$p" \
      'BEGIN {printf "%.3f", a/b}') of the compile CPU (the cold ratio's floor is 1 + that);" \
      "cruxprov's own CPU is $(awk -v a="$own" -v b="$fcpu" 'BEGIN {printf "%.1f", a/b}')x it"
  fi
  if [ -n "$floortmpfs" ]; then
    read -r fcpu _ <<<"$floortmpfs"
    ftxt=   # cruxprov's own CPU on the tmpfs (a share of the compile CPU) against it
    [ -n "${T[owntmpfs]:-}" ] && ftxt="; cruxprov's own CPU there is $(awk -v r="$(median "${T[owntmpfs]}")" \
      -v a="$fcpu" -v b="$p" 'BEGIN {printf "%.1f", r / 1e4 * b / a}')x it"
    echo "the same on the tmpfs: $(ms "$fcpu") ms, $(awk -v a="$fcpu" -v b="$p" 'BEGIN {printf "%.3f", a/b}')" \
      "of the compile CPU$ftxt"
  fi
fi
echo "cold creates, each against its own compile CPU / $CORES cores: median" \
  "$(awk -v r="$(median "${T[rcold]}")" 'BEGIN {printf "%.3f", r / 1e4}'), runs:" \
  "$(for x in ${T[rcold]}; do awk -v r="$x" 'BEGIN {printf " %.3f", r / 1e4}'; done) (target: <= 1.15)"
if [ -n "${T[rtmpfs]:-}" ]; then
  owntxt=   # cruxprov's own CPU there, when /usr/bin/time measured it
  [ -n "${T[owntmpfs]:-}" ] && owntxt="; cruxprov's own CPU there: $(awk -v r="$(median "${T[owntmpfs]}")" \
    'BEGIN {printf "%.3f", r / 1e4}') of the compile CPU"
  echo "cold creates with the home on a tmpfs, each against its own compile CPU / $CORES cores: median" \
    "$(awk -v r="$(median "${T[rtmpfs]}")" 'BEGIN {printf "%.3f", r / 1e4}'), runs:" \
    "$(for x in ${T[rtmpfs]}; do awk -v r="$x" 'BEGIN {printf " %.3f", r / 1e4}'; done)$owntxt" \
    "(the difference to the line above is the disk file system's work)"
fi
echo "cold creates, the collector: $(median "${T[gcn_coldpyc]}") collections, $(ms "$(median "${T[gccpu_coldpyc]}")") ms of CPU" \
  "(medians; GOGC=400, the default here); one at GOGC=100 (Go's default): $gcn100 collections," \
  "$(ms "$gccpu100") ms, ratio $(awk -v r="$r100" 'BEGIN {printf "%.3f", r / 1e4}')"
ownthp=-
[ -n "${T[ccpu_coldpyc]:-}" ] && ownthp=$(awk -v a="$(median "${T[ccpu_coldpyc]}")" -v b="$(median "${T[cpu_coldpyc]}")" 'BEGIN {printf "%.0f", (a - b) / 1e6}')
echo "the tricks against page faults: one cold create with GODEBUG=disablethp=1 (them off): $coldnothp ms" \
  "(median with them: $(ms "$(median "${T[crux_coldpyc]}")") ms), ratio" \
  "$(awk -v r="$rnothp" 'BEGIN {printf "%.3f", r / 1e4}') (median above with them:" \
  "$(awk -v r="$(median "${T[rcold]}")" 'BEGIN {printf "%.3f", r / 1e4}')), cruxprov's own CPU $ownnothp ms" \
  "(median with them: $ownthp ms); one warm create (bytecode) with them off: $warmnothp ms" \
  "(median with them: $(ms "$(median "${T[crux_compile]}")") ms)"
others=${T[other_coldpyc]:-" -"}
echo "cold creates, core-ms the machine's cores were idle: ${T[idle_coldpyc]# }; stolen by the hypervisor:" \
  "${T[steal_coldpyc]# }; taken by other processes: ${others# } (each a wall clock of that / $CORES;" \
  "/proc/stat, 10 ms ticks)"
echo "cold creates, each run: wall ms$(for x in ${T[crux_coldpyc]}; do printf ' %s' $((x / 1000000)); done);" \
  "inodes skipped in the env's block groups:${T[holes]}"
for mode in coldpyc compile nocompile; do
  echo "create ($mode) stages, medians: install $(ms "$(median "${T[install_$mode]}")") ms," \
    "compile $(ms "$(median "${T[compile_$mode]}")") ms after it (compile CPU $(ms "$(median "${T[cpu_$mode]}")") ms)," \
    "seal $(ms "$(median "${T[seal_$mode]}")") ms"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
