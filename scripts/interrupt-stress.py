#!/usr/bin/env python3
"""Interrupt cruxprov commands at random moments and check what they leave.

DESIGN §14: SIGINT/SIGTERM stop work promptly, remove staging debris and
leave the store consistent; nothing partial is ever accepted. Each iteration
starts one command (or two racing), sends SIGINT, SIGTERM or SIGKILL after a
random delay, then checks: the exit (a caught signal: non-zero, one line
saying it was interrupted, no Go panic, and how long it took), env verify
--deep of every env in env list, registry log --verify, receipts scan,
gc --dry-run (debris it lists must be gone after the next command), the
store's tmp/ and $TMPDIR, and that the same command run again succeeds with
no cleanup by hand. A run of the sleep entrypoint must leave its attempt in
the ledger (an outcome cancelled, or an orphan intent after SIGKILL).

    python3 scripts/interrupt-stress.py --bin bin/cruxprov --fixtures DIR \\
        --work DIR [--seed N] [--iters N] [--only install,run,...]

DIR of --fixtures is what `go run ./internal/fixtures/cmd -out DIR` writes.
Run it as the user who owns --work (CI's cruxprov-rootless). The index is
served on loopback, slowed down (each file in chunks) so that fetches last
long enough to be interrupted. Prints one line per iteration and a summary;
exits 1 when a check failed. Rerun with the printed seed to repeat a run.
"""

import argparse
import functools
import http.server
import json
import os
import random
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time

PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else shutil.which("python3")
SIGS = {"INT": signal.SIGINT, "TERM": signal.SIGTERM, "KILL": signal.SIGKILL}


class SlowHandler(http.server.SimpleHTTPRequestHandler):
    """A static file server that sends bodies in small chunks, slowly."""

    def log_message(self, *a):
        pass

    def copyfile(self, src, dst):
        time.sleep(random.uniform(0, 0.05))
        while True:
            b = src.read(16 << 10)
            if not b:
                return
            try:
                dst.write(b)
            except OSError:
                return
            time.sleep(0.01)


def serve(directory):
    h = functools.partial(SlowHandler, directory=directory)
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), h)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return "http://127.0.0.1:%d/simple/" % srv.server_address[1]


def rmtree(p):
    if not os.path.lexists(p):
        return
    for root, dirs, _ in os.walk(p):
        for d in dirs:
            q = os.path.join(root, d)
            if not os.path.islink(q):
                os.chmod(q, 0o700)
    os.chmod(p, 0o700)
    shutil.rmtree(p)


class Failure(Exception):
    pass


class Stress:
    def __init__(self, a):
        self.a = a
        self.bin = os.path.abspath(a.bin)
        self.fx = os.path.abspath(a.fixtures)
        self.work = os.path.abspath(a.work)
        self.rng = random.Random(a.seed)
        self.index = serve(os.path.join(self.work, "index"))
        self.failures = []
        self.latency = []  # (seconds, scenario, signal)
        self.counts = {}
        self.dur = {}
        self.stray_after_kill = []
        rmtree(os.path.join(self.work, "stores"))
        self.wheel = lambda n: os.path.join(self.fx, "wheels", n)

    # --- running cruxprov -------------------------------------------------

    def env(self, home, tmpdir):
        e = {
            "PATH": "/usr/bin:/bin",
            "HOME": os.environ.get("HOME", "/tmp"),
            "CRUXPROV_HOME": home,
            "XDG_STATE_HOME": os.path.join(os.path.dirname(home), "state"),
            "TMPDIR": tmpdir,
            "CRUXPROV_KEY_PASSWORD": "pw",
        }
        return e

    def cx(self, home, tmpdir, *args, ok=True, timeout=120):
        p = subprocess.run([self.bin, *args], env=self.env(home, tmpdir), capture_output=True,
                           text=True, timeout=timeout)
        if ok and p.returncode != 0:
            raise Failure("%s: exit %d: %s" % (" ".join(args), p.returncode, p.stderr.strip()[-600:]))
        return p

    def start(self, home, tmpdir, args):
        return subprocess.Popen([self.bin, *args], env=self.env(home, tmpdir), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True,
                                # a shell's background job ignores SIGINT, and its
                                # children inherit that: cruxprov must start as a
                                # terminal starts it
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))

    # --- fixtures of state ------------------------------------------------

    def fresh(self, name):
        """A new store with the interfaces registered and the key trusted."""
        base = os.path.join(self.work, "stores", name)
        rmtree(base)
        home, tmpdir = os.path.join(base, "home"), os.path.join(base, "tmp")
        os.makedirs(tmpdir)
        tmpl = os.path.join(self.work, "template")
        if not os.path.isdir(tmpl):
            th, tt = os.path.join(tmpl, "home"), os.path.join(tmpl, "tmp")
            os.makedirs(tt)
            for i in ("acme.echo", "acme.diagnostics", "acme.platform", "acme.hello"):
                f = os.path.join(self.fx, "interfaces", i + ".json")
                if os.path.exists(f):
                    self.cx(th, tt, "interface", "register", i, "--schema", f)
            self.cx(th, tt, "key", "generate", "--out", os.path.join(tmpl, "alice"))
            self.cx(th, tt, "key", "trust", os.path.join(tmpl, "alice.pub"), "--name", "alice")
        shutil.copytree(os.path.join(tmpl, "home"), home, symlinks=True)
        return home, tmpdir

    def key(self):
        return os.path.join(self.work, "template", "alice.key")

    def installed(self, home, tmpdir, approve):
        self.cx(home, tmpdir, *self.install_args())
        cs = json.loads(self.cx(home, tmpdir, "changeset", "list", "--json").stdout)["changeSets"]
        ids = [c["metadata"]["id"] for c in cs if c.get("status", "proposed") == "proposed"] or [cs[0]["metadata"]["id"]]
        if approve:
            self.cx(home, tmpdir, "changeset", "approve", ids[0], "--key", self.key())
        return ids[0]

    def install_args(self):
        return ["install", self.wheel("acme_echo-1.0.0-py3-none-any.whl"), "--platform", "host",
                "--python", PY, "--index", self.index]

    def create_args(self, wheel, *extra):
        return ["env", "create", "--wheel", self.wheel(wheel), "--platform", "host", "--python", PY,
                "--index", self.index, *extra]

    # --- the scenarios ----------------------------------------------------
    # Each returns (home, tmpdir, [argv, ...], window): the commands to start
    # (the first is the one interrupted unless the scenario is a race) and
    # the span the random delay is drawn from.

    def sc_install(self, i):
        h, t = self.fresh("install")
        return h, t, [self.install_args()], 1.5

    def sc_create(self, i):
        h, t = self.fresh("create")
        return h, t, [self.create_args("acme_native-1.0.0-py3-none-any.whl")], 1.2

    def sc_create_nocompile(self, i):
        h, t = self.fresh("create-nc")
        return h, t, [self.create_args("acme_native-1.0.0-py3-none-any.whl", "--no-compile")], 1.0

    def sc_replace(self, i):
        h, t = self.persistent("replace", lambda h, t: self.cx(h, t, *self.create_args("acme_echo-1.0.0-py3-none-any.whl")))
        envs = self.envs(h, t)
        return h, t, [["env", "create", "--replace", self.rng.choice(envs), "--offline"]], 0.8

    def sc_fetch(self, i):
        h, t = self.fresh("fetch")
        return h, t, [["fetch", "--wheel", self.wheel("acme_native-1.0.0-py3-none-any.whl"), "--platform", "host",
                       "--python", PY, "--index", self.index]], 0.6

    def sc_gc_envs(self, i):
        h, t = self.persistent("gc", lambda h, t: self.installed(h, t, True))
        for w, extra in (("acme_native-1.0.0-py3-none-any.whl", ()), ("acme_scripts-1.0.0-py3-none-any.whl", ()),
                         ("acme_native-1.0.0-py3-none-any.whl", ("--no-compile",)),
                         ("acme_scripts-1.0.0-py3-none-any.whl", ("--no-compile",))):
            self.cx(h, t, *self.create_args(w, *extra))
        return h, t, [["gc", "--envs"]], 0.5

    def sc_approve(self, i):
        h, t = self.fresh("approve")
        cs = self.installed(h, t, False)
        return h, t, [["changeset", "approve", cs, "--key", self.key()]], 1.5

    def sc_keygen(self, i):
        h, t = self.persistent("keygen", lambda h, t: None)
        return h, t, [["key", "generate", "--out", os.path.join(os.path.dirname(h), "k%d" % i)]], 0.8

    def sc_run(self, i):
        def setup(h, t):
            self.installed(h, t, True)
            with open(os.path.join(os.path.dirname(h), "in.json"), "w") as f:
                f.write('{"seconds": 1}')
            with open(os.path.join(os.path.dirname(h), "token"), "w") as f:
                f.write("tok")
        h, t = self.persistent("run", setup)
        d = os.path.dirname(h)
        return h, t, [["run", "acme-echo", "sleep", "--input", os.path.join(d, "in.json"),
                       "--secret", "acme/api-token=@" + os.path.join(d, "token")]], 1.6

    def sc_race_install_gc(self, i):
        h, t = self.fresh("race-ig")
        for w in ("acme_native-1.0.0-py3-none-any.whl", "acme_scripts-1.0.0-py3-none-any.whl"):
            self.cx(h, t, *self.create_args(w))
        return h, t, [["gc", "--envs", "--wait"], self.install_args()], 1.5

    def sc_race_create2(self, i):
        h, t = self.fresh("race-cc")
        a = self.create_args("acme_native-1.0.0-py3-none-any.whl")
        return h, t, [a, list(a)], 1.2

    def persistent(self, name, setup):
        base = os.path.join(self.work, "stores", name)
        home, tmpdir = os.path.join(base, "home"), os.path.join(base, "tmp")
        if not os.path.isdir(home):
            h0, t0 = self.fresh(name)
            setup(h0, t0)
        return home, tmpdir

    def envs(self, h, t):
        return [e["path"] for e in json.loads(self.cx(h, t, "env", "list", "--json").stdout)["envs"]]

    # --- checks -----------------------------------------------------------

    def ledger_attempts(self, h, t):
        d = json.loads(self.cx(h, t, "receipts", "list", "--json").stdout)
        return d["attempts"], d.get("orphans", [])

    def debris(self, h, t):
        d = json.loads(self.cx(h, t, "gc", "--dry-run", "--json").stdout)
        # unreferenced blobs and their cache entries are gc's to remove, not debris
        return sorted(r for r in d["removed"] if r.startswith(("tmp/", "envs/")) or "/.tmp" in r)

    def consistent(self, h, t, where):
        for p in self.envs(h, t):
            v = self.cx(h, t, "env", "verify", p, "--deep", ok=False)
            if v.returncode != 0:
                raise Failure("%s: env verify --deep %s: exit %d: %s" % (where, p, v.returncode, v.stderr.strip()))
        self.cx(h, t, "registry", "log", "--verify")
        self.cx(h, t, "receipts", "scan")

    def strays(self, h, t):
        """Processes whose command line or environment names this store."""
        found = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    cl = f.read()
                with open("/proc/%s/environ" % pid, "rb") as f:
                    en = f.read()
                with open("/proc/%s/stat" % pid) as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if state != "Z" and (os.path.dirname(h).encode() in cl or ("CRUXPROV_HOME=" + h).encode() in en):
                found.append("%s %s" % (pid, cl.replace(b"\0", b" ").decode(errors="replace")[:200]))
        return found

    def leftovers(self, h, t):
        st = sorted(os.listdir(os.path.join(h, "tmp"))) if os.path.isdir(os.path.join(h, "tmp")) else []
        td = sorted(os.listdir(t))
        return st, td

    def iteration(self, name, i):
        fn = getattr(self, "sc_" + name)
        h, t, cmds, window = fn(i)
        race = len(cmds) > 1
        sig = self.rng.choice(list(SIGS))
        # the span: how long the same command took uninterrupted lately
        window = self.dur.setdefault(name, window)
        delay = self.rng.uniform(0, window)
        victim = self.rng.randrange(len(cmds)) if race else 0
        before = self.ledger_attempts(h, t) if name == "run" else None
        # a terminal's Ctrl-C signals the whole foreground process group
        # (the compilers and the probe die of it too): half the time
        group = self.rng.random() < 0.5
        self.last = "%s%s at %.3fs to %s" % (sig, " (group)" if group else "", delay, "racer %d" % victim if race else "it")
        procs = []
        for n, c in enumerate(cmds):
            procs.append(self.start(h, t, c))
            if race and n == 0:
                time.sleep(self.rng.uniform(0, 0.3))
        p = procs[victim]
        t0 = time.monotonic()
        time.sleep(delay)
        sent = p.poll() is None
        if sent:
            if group:
                os.killpg(p.pid, SIGS[sig])
            else:
                os.kill(p.pid, SIGS[sig])
            ts = time.monotonic()
        outs = [None] * len(procs)
        for n in [victim] + [n for n in range(len(procs)) if n != victim]:
            q = procs[n]
            try:
                o, e = q.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                q.kill()
                o, e = q.communicate()
                raise Failure("still running 60 s after the signal: %s" % e.strip()[-300:])
            outs[n] = (q.returncode, o, e)
            if n == victim:
                took = time.monotonic() - ts if sent else 0.0
        # the children of a killed cruxprov (the compilers read their stdin to
        # EOF) may outlive it briefly; those of a caught signal may not
        left, waited = self.strays(h, t), 0.0
        while left and sig == "KILL" and waited < 3:
            time.sleep(0.05)
            waited += 0.05
            left = self.strays(h, t)
        if left:
            raise Failure("%s at %.3fs (%s): processes left running: %s" % (sig, delay, "sent" if sent else "not sent", left))
        if waited > 0:
            self.stray_after_kill.append((waited, name))
        rc, _, err = outs[victim]
        what = "exited before the signal" if not sent else None
        if sent and sig != "KILL":
            self.latency.append((took, name, sig))
            if rc == -SIGS[sig]:
                what = "died of it before its handler (default action)"
            elif rc == 0:
                what = "completed (signal after the work)"
            else:
                what = "interrupted"
                # a stop slower than half a second says it is stopping first
                lines = [l for l in err.splitlines() if l and not l.startswith("waiting for the store")
                         and not l.startswith("interrupted: stopping cleanly")]
                said = "interrupted" in lines[0] if lines else False
                if name == "run":  # the run's own line: its attempt, cancelled by the signal
                    said = said or "cancelled the run (%s signal received)" % ("interrupt" if sig == "INT" else "terminated") in lines[0]
                if rc != 1 or len(lines) != 1 or not said:
                    raise Failure("%s after %.3fs: exit %d, stderr %r" % (sig, delay, rc, err[-800:]))
        elif sent:
            what = "killed"
        for _, _, e in outs:
            if "panic" in e or "goroutine " in e:
                raise Failure("a Go panic: %s" % e[-800:])
        for n, (c, _, e) in enumerate(outs):
            if n != victim and c != 0 and "in use" not in e and "interrupted" not in e:
                raise Failure("the other racer failed: exit %d: %s" % (c, e.strip()[-600:]))
        # the store as the interruption left it
        self.consistent(h, t, "after the signal")
        deb = self.debris(h, t)
        st, td = self.leftovers(h, t)
        if sig != "KILL" and sent and rc != 0 and -rc != SIGS[sig]:
            # a caught signal removes its own staging
            if [x for x in st] or [x for x in td if not x.startswith("cruxprov-run-")]:
                raise Failure("a caught %s left tmp/ %s, TMPDIR %s" % (sig, st, td))
        if name == "run" and sent:
            # the attempt is never lost: a run stopped before its intent
            # records nothing, one stopped after it has its outcome
            # (cancelled, for a caught signal) or, killed, an orphan intent
            att, _ = self.ledger_attempts(h, t)
            new = att[len(before[0]):]
            if len(new) > 1:
                raise Failure("%d attempts recorded for one run" % len(new))
            if new:
                out = new[0].get("outcome")
                what += " [%s]" % (out["status"] + "/" + out.get("error_code", "") if out else "orphan")
                if sig != "KILL" and rc != 0 and (out is None or out.get("error_code") != "cancelled"):
                    raise Failure("a caught %s recorded %s" % (sig, out and (out["status"], out.get("error_code"))))
            else:
                what += " [nothing recorded]"
        # the same command again, with no cleanup
        r0 = time.monotonic()
        r = self.cx(h, t, *cmds[victim], ok=False, timeout=180)
        if r.returncode == 0 and not race:
            self.dur[name] = 0.5 * self.dur[name] + 0.5 * (time.monotonic() - r0)
        if name == "keygen" and rc == 0 and r.returncode == 1 and "exists: not overwriting a key" in r.stderr:
            pass  # the pair was made: the same command again refuses to overwrite it, as it should
        elif r.returncode != 0:
            raise Failure("run again: exit %d: %s" % (r.returncode, r.stderr.strip()[-600:]))
        self.consistent(h, t, "after the run again")
        deb2 = self.debris(h, t)
        stale = [d for d in deb if d in deb2]
        st2, td2 = self.leftovers(h, t)
        if stale:
            raise Failure("gc --dry-run still lists %s after the command ran again" % stale)
        if st2 or [x for x in td2 if not x.startswith("cruxprov-run-")]:
            raise Failure("after the run again: tmp/ %s, TMPDIR %s" % (st2, td2))
        slow = (" (stderr %r)" % err.strip()[-300:]) if sent and sig != "KILL" and took > 0.5 else ""
        return "%s %s%s at %.3fs: %s, exit %d%s%s%s" % (
            name, sig, "/group" if group else "", delay, what, rc, (", %.3fs to exit" % took) if sent and sig != "KILL" else "",
            (", debris %s" % deb) if deb else "", slow)

    def main(self, names, iters):
        for i in range(iters):
            for name in names:
                self.counts[name] = self.counts.get(name, 0) + 1
                try:
                    print("%3d %s" % (i, self.iteration(name, i)), flush=True)
                except Failure as f:
                    f = "%s (after %s)" % (f, getattr(self, "last", "?"))
                    self.failures.append((name, i, str(f)))
                    print("%3d %s FAIL: %s" % (i, name, f), flush=True)
        lat = sorted(self.latency, reverse=True)
        print("\nseed %d; iterations %s" % (self.a.seed, self.counts))
        if lat:
            print("signal to exit (INT/TERM, %d): worst %s; median %.3fs" % (
                len(lat), ", ".join("%.3fs %s %s" % x for x in lat[:5]), lat[len(lat) // 2][0]))
        if self.stray_after_kill:
            print("children outliving a SIGKILLed cruxprov: %d times, longest %.2fs" % (
                len(self.stray_after_kill), max(self.stray_after_kill)[0]))
        for f in self.failures:
            print("FAIL %s #%d: %s" % f)
        return 1 if self.failures else 0


SCENARIOS = ["install", "create", "create_nocompile", "replace", "fetch", "gc_envs", "approve", "keygen", "run",
             "race_install_gc", "race_create2"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--fixtures", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--only", default=",".join(SCENARIOS))
    a = ap.parse_args()
    if a.seed is None:
        a.seed = random.SystemRandom().randrange(1 << 31)
    print("seed", a.seed, flush=True)
    os.makedirs(a.work, exist_ok=True)
    idx = os.path.join(a.work, "index")
    if not os.path.isdir(idx):
        subprocess.run([a.bin, "index", "build", idx, "--from", os.path.join(a.fixtures, "wheels"), "--quiet"],
                       check=True)
    sys.exit(Stress(a).main(a.only.split(","), a.iters))


if __name__ == "__main__":
    main()
