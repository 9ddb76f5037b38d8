#!/usr/bin/env bash
# Where a cold-cache create's own CPU goes, kernel included (Go's profiler sees only its own
# threads in user space, and most of this is the kernel's work on the env's files).
#
# One create of the --size medium corpus's env after removing the env and the pyc cache (as the
# bench's cold rounds), under `perf record -g` at 2 kHz; the samples of cruxprov's threads (its
# compile processes are python) are split into the kernel's by system call (or page fault) and
# Go's by leaf function. It prints the compile processes' CPU (compile_cpu_ns) and cruxprov's
# own as sampled, then both tables, in milliseconds of CPU. (Not /usr/bin/time's figure, which
# would count perf's own work.) The machine should be otherwise idle.
#
#   scripts/cold-profile.sh [BIN]      (default bin/cruxprov; needs perf and python3)
#     env: PYTHON, CORPUS_SIZE (medium), MAKE_CORPUS (../shared/bench/make-corpus.py)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(realpath "${1:-bin/cruxprov}")
PY=${PYTHON:-/root/.pyenv/versions/3.11.7/bin/python3.11}
[ -x "$PY" ] || PY=$(command -v python3)
PY=$("$PY" -c 'import os,sys;print(os.path.realpath(sys.executable))')
MAKE_CORPUS=${MAKE_CORPUS:-../shared/bench/make-corpus.py}
[ -f "$MAKE_CORPUS" ] || { echo "cold-profile.sh: no $MAKE_CORPUS" >&2; exit 1; }
command -v perf >/dev/null || { echo "cold-profile.sh: needs perf (apt install linux-perf)" >&2; exit 1; }

CRUXPROV=$BIN
. bench/lib/common.sh
bench_setup coldprof
bench_cold_home
perf record -q -F 2000 -g -o "$W/perf.data" -- \
  "$BIN" "${args[@]}" --offline --json >"$W/out.json" 2>"$W/perf.err" || { cat "$W/perf.err" >&2; exit 1; }
perf script -i "$W/perf.data" -F tid,comm,ip,sym,dso 2>/dev/null >"$W/samples.txt"
python3 - "$W/samples.txt" "$W/out.json" <<'EOF'
import collections, json, sys
samples, cur = [], None
for line in open(sys.argv[1], errors="replace"):
    if line.strip() and not line[0].isspace():
        cur = {"comm": line.split()[0], "stack": []}
        samples.append(cur)
    elif line.strip() and cur is not None:
        cur["stack"].append(line.strip())
def name(frame):
    parts = frame.split(None, 1)
    return parts[1].rsplit("(", 1)[0].strip() if len(parts) > 1 else "?"
own = [s for s in samples if s["comm"] == "cruxprov" and s["stack"]]
ms = lambda n: n / 2.0  # 2,000 samples a second
compile_ns = json.load(open(sys.argv[2]))["timings"].get("compile_cpu_ns", 0)
print(f"create: compile processes {compile_ns / 1e6:.0f} ms of CPU, cruxprov itself {ms(len(own)):.0f} ms "
      f"({ms(len(own)) / max(compile_ns / 1e6, 1):.3f} of the compile CPU)")
kernel = [x for x in own if "kernel" in x["stack"][0]]
calls = collections.Counter()
for x in kernel:
    names = [name(f) for f in x["stack"]]
    key = next((n for n in names if n.startswith("__x64_sys_") or n == "asm_exc_page_fault"), None)
    if key is None and "do_syscall_64" in names:
        i = names.index("do_syscall_64")
        key = names[i - 1] if i > 0 else "?"
    calls[key or names[0]] += 1
print(f"\nkernel, {ms(len(kernel)):.0f} ms, by system call:")
for k, v in calls.most_common(12):
    print(f"  {ms(v):7.1f}  {k.replace('__x64_sys_', '')}")
user = [x for x in own if "kernel" not in x["stack"][0]]
leaves = collections.Counter(name(x["stack"][0]) for x in user)
print(f"\nGo, {ms(len(user)):.0f} ms, by leaf function:")
for k, v in leaves.most_common(12):
    print(f"  {ms(v):7.1f}  {k}")
EOF
