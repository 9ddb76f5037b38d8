"""The harness, run as the executor runs it: a real interpreter in a venv,
``python -I -m cruxible_provider_runtime.harness`` with fd 1 on stderr from
the start and the protocol channel on fd 4, named by CRUXIBLE_PROTOCOL_FD
(or, as for a runtime before 0.2.0, on fd 1), a real pipe on fd 3.

Run with: python3 -m unittest discover -s python/tests -t python
"""

import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PYROOT = os.path.dirname(HERE)  # python/, which holds cruxible_provider_runtime

PROTOCOL_FD = 4
"""Where the executor hands the channel over (invoke.ProtocolFD in Go)."""


def direct(py):
    """The executor's argv (python.Harness in Go), DESIGN section 10's."""
    return [py, "-I", "-m", "cruxible_provider_runtime.harness"]


# Start-up code, as a dependency's .pth file runs it, misbehaving when the
# variable CRUX_TEST_STARTUP says how (-I ignores PYTHON* variables only).
STARTUP_PTH = (
    "import os, sys; sys.__dict__.setdefault('crux_test_pth', []).append(1); m = os.environ.get('CRUX_TEST_STARTUP', ''); "
    "m == 'print' and (print('printed at start-up'), sys.stdout.flush(), os.write(1, b'written on fd 1 at start-up\\n')); "
    "m == 'exit' and sys.exit(7); "
    "m == 'raise' and 1 / 0; "
    "d = os.environ.get('CRUX_TEST_RUNTIME'); d and sys.path.insert(0, d)\n"
)

# What a program sees of its start.
START_INFO = """
import json, site, sys
info = {"prefix": sys.prefix, "exec_prefix": sys.exec_prefix, "base_prefix": sys.base_prefix,
        "path": sys.path, "isolated": sys.flags.isolated, "no_user_site": sys.flags.no_user_site,
        "enable_user_site": site.ENABLE_USER_SITE, "sitecustomize": "sitecustomize" in sys.modules,
        "usercustomize": "usercustomize" in sys.modules}
"""

# All a provider (or a multiprocessing child of one) sees of its start.
FULL_INFO = """
import json, os, site, subprocess, sys

def full_info():
    flags = {k: getattr(sys.flags, k) for k in dir(sys.flags) if not k.startswith("_") and not callable(getattr(sys.flags, k))}
    return {"argv": sys.argv, "orig_argv": getattr(sys, "orig_argv", None), "executable": sys.executable,
            "flags": flags, "prefix": sys.prefix, "exec_prefix": sys.exec_prefix, "base_prefix": sys.base_prefix,
            "path": sys.path, "pth_ran": len(getattr(sys, "crux_test_pth", [])),
            "locale_env": {k: v for k, v in os.environ.items() if k.startswith("LC_") or k == "LANG"},
            "stdio": [sys.stdin.encoding, sys.stdin.errors, sys.stderr.encoding, sys.stderr.errors],
            "enable_user_site": site.ENABLE_USER_SITE, "sitecustomize": "sitecustomize" in sys.modules,
            "main": getattr(sys.modules.get("__main__"), "__spec__", None) and sys.modules["__main__"].__spec__.name}

def _child(w):
    w.send(full_info())
    w.close()

def children():
    import multiprocessing
    out = {}
    for method in ("spawn", "forkserver"):
        ctx = multiprocessing.get_context(method)
        r, w = ctx.Pipe(duplex=False)
        p = ctx.Process(target=_child, args=(w,))
        p.start()
        w.close()
        out[method] = r.recv()
        p.join()
    return out

def descriptors():
    inheritable = sorted(int(fd) for fd in os.listdir("/proc/self/fd") if _inheritable(int(fd)))
    code = "import os, json; print(json.dumps([os.environ.get(%r), sorted(int(f) for f in os.listdir('/proc/self/fd'))]))" % "CRUXIBLE_PROTOCOL_FD"
    out = subprocess.run([sys.executable, "-I", "-c", code], close_fds=False, stdout=subprocess.PIPE, check=True).stdout
    var, fds = json.loads(out)
    return {"var": os.environ.get("CRUXIBLE_PROTOCOL_FD"), "inheritable": inheritable, "child_var": var, "child_fds": fds}

def _inheritable(fd):
    try:
        return os.get_inheritable(fd)
    except OSError:
        return False
"""

PROVIDERS = {
    "tp_start": START_INFO + FULL_INFO + '''
from cruxible_provider_runtime import ProviderResult

def info_(ctx):
    return ProviderResult.ok(info)

def full(ctx):
    return ProviderResult.ok({"self": full_info(), "children": children()})

def fds(ctx):
    return ProviderResult.ok(descriptors())
''',
    "tp_basic": '''
        import os, subprocess, sys, threading, time
        from cruxible_provider_runtime import ProviderResult

        def echo(ctx):
            return ProviderResult.ok({"echo": ctx.input})

        class Greeter:
            def __init__(self):
                self.greeting = "hello"
            def __call__(self, ctx):
                return ProviderResult.ok(self.greeting + " " + ctx.input["name"])

        class NotCallable:
            pass

        def context(ctx):
            return ProviderResult.ok({
                "run_id": ctx.run_id, "entrypoint": ctx.entrypoint,
                "idempotency_key": ctx.idempotency_key,
                "protocol_version": ctx.protocol_version,
                "timeout_ms": ctx.budgets.timeout_ms, "output_bytes": ctx.budgets.output_bytes,
                "egress_declared": list(ctx.egress_declared),
                "secrets": sorted(ctx.secrets),
                "stdin": sys.stdin.read() if sys.stdin else None,
            })

        def noisy(ctx):
            print("print to stdout")
            sys.stdout.write("sys.stdout.write\\n")
            sys.__stdout__.write("sys.__stdout__.write\\n")
            sys.__stdout__.flush()
            os.write(1, b"os.write to fd 1\\n")
            subprocess.run(["sh", "-c", "echo child writes to its stdout"], check=True)
            return ProviderResult.ok("quiet result")

        def boom(ctx):
            raise RuntimeError("it broke")

        def no_stderr(ctx):
            sys.stderr = None
            raise RuntimeError("and nowhere to print the traceback")

        def exits(ctx):
            sys.exit(3)

        def returns_dict(ctx):
            return {"not": "a ProviderResult"}

        async def coroutine(ctx):
            return ProviderResult.ok(1)

        def nan(ctx):
            return ProviderResult.ok({"x": float("nan")})

        def int_keys(ctx):
            return ProviderResult.ok({1: "one"})

        def a_tuple(ctx):
            return ProviderResult.ok({"pair": (1, 2)})

        def unknown_code(ctx):
            return ProviderResult.error("teapot", "short and stout")

        def rejects(ctx):
            return ProviderResult.error("bad_request", "input needs a name")

        def uses_secret(ctx):
            token = ctx.secret("acme/api-token")
            ctx.egress.record("https://api.acme.example/v1/echo")
            ctx.egress.record("https://api.acme.example/v1/echo")
            ctx.egress.record("https://other.example/")
            try:
                os.fstat(3)
                fd3_open = True
            except OSError:
                fd3_open = False
            return ProviderResult.ok({"token_len": len(token), "fd3_open": fd3_open})

        def leaks_secret(ctx):
            ctx.egress.record("https://api.acme.example/v1/echo")
            raise ValueError("token was " + ctx.secrets["acme/api-token"])

        def leaks_secret_forms(ctx):
            v = ctx.secrets["acme/api-token"]
            raise ValueError("raw %s json %s repr %r" % (v, json_escaped(v), v))

        def json_escaped(v):
            import json
            return json.dumps(v)[1:-1]

        def secret_in_url(ctx):
            ctx.egress.record("https://api.acme.example/?key=" + ctx.secret("acme/api-token"))
            return ProviderResult.ok("sent")

        def leaks_secret_at_the_cut(ctx):
            # The value straddles the harness's 2000-character message limit.
            raise ValueError("x" * (1990 - len("ValueError: ")) + ctx.secrets["acme/api-token"])

        class Unprintable(Exception):
            def __str__(self):
                raise ValueError("str() of this exception fails")

        def unprintable(ctx):
            raise Unprintable()

        def leaks_secret_in_error(ctx):
            return ProviderResult.error("provider_error", "denied for " + ctx.secrets["acme/api-token"])

        def lingering_thread(ctx):
            threading.Thread(target=time.sleep, args=(600,)).start()
            return ProviderResult.ok("done")

        NOT_CALLABLE = 42

        class Unchecked(ProviderResult):
            __slots__ = ()
            def check(self):
                pass

        class Lying(ProviderResult):
            __slots__ = ()
            @property
            def status(self):
                return "ok"
            @property
            def result(self):
                return "not what it holds"

        def unchecked_code(ctx):
            return Unchecked("error", code="cancelled", message="a code of the executor's")

        def unchecked_message(ctx):
            return Unchecked("error", code="provider_error", message=5)

        def unchecked_value(ctx):
            return Unchecked("ok", result=float("nan"))

        def lying(ctx):
            return Lying.error("bad_request", "the slots say error")

        class Lazy:
            def __getattr__(self, name):
                raise RuntimeError("not loaded yet")

        class OutOfContext:
            """As werkzeug's LocalProxy outside its context: every attribute raises."""
            def __getattr__(self, name):
                raise RuntimeError("working outside of application context")
            @property
            def __class__(self):
                raise RuntimeError("working outside of application context")

        def returns_lazy(ctx):
            return Lazy()

        def returns_proxy(ctx):
            return OutOfContext()

        def egress_not_text(ctx):
            ctx.egress.record("https://api.acme.example/")
            ctx.egress._urls.append(5)
            return ProviderResult.ok("sent")

        def egress_surrogate(ctx):
            ctx.egress._urls.append("https://x.example/\\ud800")
            return ProviderResult.ok("sent")

        def egress_replaced(ctx):
            object.__setattr__(ctx, "_egress", None)
            raise RuntimeError("and the log is gone")
    ''',
    "tp_import_error": '''
        raise ImportError("this module refuses to load")
    ''',
    "tp_unprintable_import": '''
        class Unprintable(Exception):
            def __str__(self):
                raise ValueError("str() of this exception fails")
        raise Unprintable()
    ''',
    "tp_prints_on_import": '''
        import os
        print("printed at import")
        os.write(1, b"fd 1 at import\\n")
        from cruxible_provider_runtime import ProviderResult
        def run(ctx):
            return ProviderResult.ok("imported")
    ''',
}


def setUpModule():
    global TMP, PY
    TMP = tempfile.mkdtemp(prefix="crux-harness-")
    venv = os.path.join(TMP, "venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    PY = os.path.join(venv, "bin", "python")
    site = subprocess.run(
        [PY, "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()
    provdir = os.path.join(TMP, "providers")
    os.mkdir(provdir)
    for name, src in PROVIDERS.items():
        with open(os.path.join(provdir, name + ".py"), "w") as f:
            f.write(textwrap.dedent(src))
    with open(os.path.join(site, "crux_test_paths.pth"), "w") as f:
        f.write(PYROOT + "\n" + provdir + "\n")
    with open(os.path.join(site, "crux_test_startup.pth"), "w") as f:
        f.write(STARTUP_PTH)


def tearDownModule():
    shutil.rmtree(TMP, ignore_errors=True)


def request(obj, **over):
    req = {
        "protocol_version": 1,
        "run_id": "run-1",
        "entrypoint": "ep",
        "object": obj,
        "input": {"name": "world"},
        "secret_channel": None,
        "budgets": {"timeout_ms": 1000, "output_bytes": 4096},
        "egress_declared": ["https://api.acme.example/*"],
        "idempotency_key": None,
    }
    req.update(over)
    return req


def secret_forms(value):
    """The forms a secret value can take in text: raw, JSON-escaped (with
    and without ASCII escapes) and Python repr, each without its quotes."""
    forms = {value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1], repr(value)[1:-1]}
    return sorted(f for f in forms if f)


class Run:
    def __init__(self, code, stdout, stderr):
        self.code, self.stdout, self.stderr = code, stdout, stderr
        lines = stdout.splitlines()
        self.doc = json.loads(lines[0]) if len(lines) == 1 else None


def harness(stdin, secret=None, close_stdout=False, env=None, handoff=True, py=None):
    """Run the harness; stdin is a dict (sent as one line) or bytes. secret,
    when not None, is written to a pipe that the child sees as fd 3.

    handoff: wired as the executor wires a runtime from 0.2.0 on: fd 1 and
    fd 2 one pipe (Run.stderr), the channel a pipe on PROTOCOL_FD
    (Run.stdout), CRUXIBLE_PROTOCOL_FD naming it. Otherwise as before 0.2.0:
    the channel is fd 1. close_stdout closes the channel's read end."""
    if isinstance(stdin, dict):
        stdin = json.dumps(stdin).encode() + b"\n"
    r = w = cr = cw = None
    # The child's fd 3 (the secret) and PROTOCOL_FD (the channel) exactly,
    # as the executor gives them: dup2'd in preexec_fn and kept by
    # pass_fds (close_fds runs after preexec_fn), so that only they and the
    # standard streams reach the harness. Moved above 10 first
    # (close-on-exec), so that one dup2 cannot overwrite the other's source.
    place = []
    if secret is not None:
        r, w = os.pipe()
        place.append((r, 3))
    if handoff:
        cr, cw = os.pipe()
        place.append((cw, PROTOCOL_FD))

    def preexec():
        high = [(fcntl.fcntl(src, fcntl.F_DUPFD_CLOEXEC, 10), dst) for src, dst in place]
        for src, dst in high:
            os.dup2(src, dst)
            os.set_inheritable(dst, True)

    kw = {"preexec_fn": preexec, "pass_fds": [dst for _, dst in place]} if place else {}
    environ = dict(os.environ, **(env or {}))
    if handoff:
        environ["CRUXIBLE_PROTOCOL_FD"] = str(PROTOCOL_FD)
    p = subprocess.Popen(
        direct(py or PY),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if handoff else subprocess.PIPE,
        cwd=TMP, env=environ, **kw,
    )
    writer = None
    if secret is not None:
        os.close(r)

        def feed():
            try:
                view = memoryview(secret)
                while view:
                    view = view[os.write(w, view[:65536]):]
            except OSError:
                pass  # the harness stopped reading (an oversized bundle)
            finally:
                os.close(w)

        writer = threading.Thread(target=feed)
        writer.start()
    if handoff:
        os.close(cw)
        got = []
        if close_stdout:
            os.close(cr)
            reader = None
        else:
            def drain():
                with os.fdopen(cr, "rb") as f:
                    got.append(f.read())

            reader = threading.Thread(target=drain)
            reader.start()
        err, _ = p.communicate(stdin, timeout=60)
        if reader:
            reader.join(60)
        if writer:
            writer.join()
        return Run(p.returncode, got[0].decode() if got else "", err.decode())
    if close_stdout:
        p.stdout.close()
        p.stdin.write(stdin)
        p.stdin.close()
        err = p.stderr.read()
        p.wait(timeout=60)
        return Run(p.returncode, "", err.decode())
    out, err = p.communicate(stdin, timeout=60)
    if writer:
        writer.join()
    return Run(p.returncode, out.decode(), err.decode())


class HarnessTest(unittest.TestCase):
    def ok(self, run, result, egress=()):
        self.assertEqual(run.code, 0, run.stderr)
        self.assertIsNotNone(run.doc, "stdout is not one JSON line: %r" % run.stdout)
        self.assertEqual(run.doc, {"status": "ok", "run_id": "run-1", "result": result, "egress": list(egress)}, run.stderr)

    def refused(self, run, code, run_id="run-1"):
        self.assertEqual(run.code, 0, run.stderr)
        self.assertIsNotNone(run.doc, "stdout is not one JSON line: %r" % run.stdout)
        self.assertEqual(run.doc["status"], "error", run.doc)
        self.assertEqual(run.doc["error"]["code"], code, run.doc)
        self.assertEqual(run.doc["run_id"], run_id)
        self.assertEqual(sorted(run.doc), ["egress", "error", "run_id", "status"])
        self.assertIsInstance(run.doc["error"]["message"], str)
        self.assertNotIn("Traceback", run.stdout)
        return run.doc["error"]["message"]

    def test_function_and_class(self):
        self.ok(harness(request("tp_basic:echo")), {"echo": {"name": "world"}})
        self.ok(harness(request("tp_basic:Greeter")), "hello world")

    def test_context_fields_and_stdin_is_closed(self):
        run = harness(request("tp_basic:context", idempotency_key="k-1", budgets={"timeout_ms": 5}))
        self.ok(run, {
            "run_id": "run-1", "entrypoint": "ep", "idempotency_key": "k-1", "protocol_version": 1,
            "timeout_ms": 5, "output_bytes": None, "egress_declared": ["https://api.acme.example/*"],
            "secrets": [], "stdin": "",
        })

    def test_trailing_stdin_after_the_line_is_not_read_by_the_provider(self):
        line = json.dumps(request("tp_basic:context")).encode() + b"\nmore data that is not the request\n"
        run = harness(line)
        self.assertEqual(run.doc["result"]["stdin"], "")

    def test_prints_never_reach_the_result(self):
        for obj, want in (("tp_basic:noisy", "quiet result"), ("tp_prints_on_import:run", "imported")):
            run = harness(request(obj))
            self.ok(run, want)
            self.assertEqual(run.stdout.count("\n"), 1)
        run = harness(request("tp_basic:noisy"))
        for text in ("print to stdout", "sys.stdout.write", "sys.__stdout__.write", "os.write to fd 1", "child writes to its stdout"):
            self.assertIn(text, run.stderr)

    def test_provider_exceptions(self):
        run = harness(request("tp_basic:boom"))
        msg = self.refused(run, "provider_error")
        self.assertIn("RuntimeError: it broke", msg)
        self.assertIn("Traceback", run.stderr)
        self.assertIn("SystemExit", self.refused(harness(request("tp_basic:exits")), "provider_error"))
        self.assertIn("nowhere to print", self.refused(harness(request("tp_basic:no_stderr")), "provider_error"))
        self.assertIn("not callable", self.refused(harness(request("tp_basic:NotCallable")), "provider_error"))

    def test_bad_returns(self):
        for obj in ("tp_basic:returns_dict", "tp_basic:coroutine", "tp_basic:nan", "tp_basic:int_keys", "tp_basic:unknown_code"):
            with self.subTest(obj=obj):
                msg = self.refused(harness(request(obj)), "result_invalid")
                self.assertIn(obj, msg)
        self.assertIn("async", self.refused(harness(request("tp_basic:coroutine")), "result_invalid"))

    def test_tuple_result_is_refused(self):
        # A tuple went out as a JSON list, a result the provider did not
        # return (ProviderResult.ok((1, 2)) != ProviderResult.ok([1, 2]) in
        # its own tests): result_invalid, saying where and to pass a list.
        msg = self.refused(harness(request("tp_basic:a_tuple")), "result_invalid")
        self.assertIn("result['pair'] is a tuple, which is not JSON: pass a list", msg)

    def test_subclass_results_are_checked_as_they_are(self):
        # A subclass's own check() and properties are not asked: its slots
        # are checked as any ProviderResult's.
        for obj, want in (("tp_basic:unchecked_code", "cancelled"), ("tp_basic:unchecked_message", "str"),
                          ("tp_basic:unchecked_value", "nan")):
            with self.subTest(obj=obj):
                self.assertIn(want, self.refused(harness(request(obj)), "result_invalid"))
        run = harness(request("tp_basic:lying"))
        self.assertEqual(run.doc["error"], {"code": "bad_request", "message": "the slots say error"})

    def test_egress_log_written_by_hand(self):
        # Provider code that writes the log's private list (or replaces
        # the log) gets result_invalid, with no egress: the harness still
        # writes a result and exits 0.
        for obj in ("tp_basic:egress_not_text", "tp_basic:egress_surrogate"):
            with self.subTest(obj=obj):
                run = harness(request(obj))
                self.assertIn("egress", self.refused(run, "result_invalid"))
                self.assertEqual(run.doc["egress"], [])
        run = harness(request("tp_basic:egress_replaced"))
        self.assertIn("the log is gone", self.refused(run, "provider_error"))
        self.assertEqual(run.doc["egress"], [])

    def test_returns_whose_attributes_raise(self):
        # Asking what was returned (isinstance, hasattr) raised: no result
        # was written and the harness exited 1.
        for obj, name in (("tp_basic:returns_lazy", "Lazy"), ("tp_basic:returns_proxy", "OutOfContext")):
            with self.subTest(obj=obj):
                self.assertIn("returned %s, not a ProviderResult" % name, self.refused(harness(request(obj)), "result_invalid"))

    def test_provider_error_result(self):
        run = harness(request("tp_basic:rejects"))
        self.assertEqual(run.doc, {"status": "error", "run_id": "run-1",
                                   "error": {"code": "bad_request", "message": "input needs a name"}, "egress": []})

    def test_import_failures(self):
        for obj in ("no_such_module:x", "tp_basic:missing", "tp_basic:NOT_CALLABLE", "tp_import_error:x", "tp_basic.nope:x"):
            with self.subTest(obj=obj):
                msg = self.refused(harness(request(obj)), "import_failed")
                self.assertIn(obj, msg)

    def test_secret_on_fd3(self):
        bundle = json.dumps({"acme/api-token": "s3cr3t-value"}).encode()
        run = harness(request("tp_basic:uses_secret", secret_channel={"fd": 3, "refs": ["acme/api-token"]}), secret=bundle)
        self.ok(run, {"token_len": 12, "fd3_open": False},
                egress=["https://api.acme.example/v1/echo", "https://other.example/"])
        run = harness(request("tp_basic:context", secret_channel={"fd": 3, "refs": ["acme/api-token"]}), secret=bundle)
        self.assertEqual(run.doc["result"]["secrets"], ["acme/api-token"])

    def test_secret_from_a_file_read_from_its_start(self):
        path = os.path.join(TMP, "bundle.json")
        with open(path, "wb") as f:
            f.write(json.dumps({"acme/api-token": "from-a-file"}).encode())
        fd = os.open(path, os.O_RDONLY)
        os.lseek(fd, 5, os.SEEK_SET)  # an offset left behind by whoever wrote it
        try:
            p = subprocess.run(
                direct(PY),
                input=json.dumps(request("tp_basic:uses_secret", secret_channel={"fd": 3, "refs": ["acme/api-token"]})).encode() + b"\n",
                capture_output=True, cwd=TMP, close_fds=False, timeout=60,
                preexec_fn=lambda: (os.dup2(fd, 3), os.set_inheritable(3, True)),
            )
        finally:
            os.close(fd)
        run = Run(p.returncode, p.stdout.decode(), p.stderr.decode())
        self.ok(run, {"token_len": 11, "fd3_open": False},
                egress=["https://api.acme.example/v1/echo", "https://other.example/"])

    def test_secret_values_are_redacted_from_messages(self):
        bundle = json.dumps({"acme/api-token": "s3cr3t-value"}).encode()
        ch = {"fd": 3, "refs": ["acme/api-token"]}
        run = harness(request("tp_basic:leaks_secret", secret_channel=ch), secret=bundle)
        msg = self.refused(run, "provider_error")
        self.assertNotIn("s3cr3t-value", run.stdout)
        self.assertIn("[redacted]", msg)
        self.assertEqual(run.doc["egress"], ["https://api.acme.example/v1/echo"])
        run = harness(request("tp_basic:secret_in_url", secret_channel=ch), secret=bundle)
        self.ok(run, "sent", egress=["https://api.acme.example/?key=[redacted]"])
        run = harness(request("tp_basic:leaks_secret_in_error", secret_channel=ch), secret=bundle)
        self.refused(run, "provider_error")
        self.assertNotIn("s3cr3t-value", run.stdout)

    def test_an_exception_whose_str_fails(self):
        # str(exc) raised inside the harness's own handler: the harness
        # wrote no result and exited 1 (harness_exited), not provider_error.
        msg = self.refused(harness(request("tp_basic:unprintable")), "provider_error")
        self.assertIn("Unprintable", msg)
        msg = self.refused(harness(request("tp_unprintable_import:run")), "import_failed")
        self.assertIn("Unprintable", msg)

    def test_redaction_is_one_pass(self):
        # Form after form, a secret "e" redacted the letters of the markers
        # a longer one had left ("[r[redacted]d[redacted]ct[redacted]d]"),
        # and of two secrets sharing characters the rest of the second
        # was left ("x[redacted]dx"). One pass now, overlapping ranges
        # merged, markers already there kept whole.
        from cruxible_provider_runtime import harness as h
        saved = list(h._SECRET_FORMS)
        try:
            for secrets, text, want in (
                (["s3cr3t", "e"], "the s3cr3t here", "th[redacted] [redacted] h[redacted]r[redacted]"),
                (["red", "act"], "a redacted act", "a [redacted][redacted]ed [redacted]"),
                (["abc", "bcd"], "xabcdx", "x[redacted]x"),
                (["aa"], "xaaax", "x[redacted]x"),
                (["e"], "th[redacted] [redacted]", "th[redacted] [redacted]"),
                (["d]x"], "a [redacted]x b", "a [redacted] b"),
            ):
                with self.subTest(secrets=secrets, text=text):
                    h._set_secrets({str(i): v for i, v in enumerate(secrets)})
                    self.assertEqual(h._redact(text), want)
        finally:
            h._SECRET_FORMS[:] = saved

    def test_a_secret_cut_by_the_message_limit_is_redacted(self):
        # The message was cut to 2000 characters before it was redacted: a
        # value straddling the cut kept its first characters ("s3cr3t-v").
        bundle = json.dumps({"acme/api-token": "s3cr3t-value"}).encode()
        ch = {"fd": 3, "refs": ["acme/api-token"]}
        run = harness(request("tp_basic:leaks_secret_at_the_cut", secret_channel=ch), secret=bundle)
        msg = self.refused(run, "provider_error")
        self.assertNotIn("s3cr", run.stdout)
        self.assertTrue(msg.startswith("ValueError: xxx"), msg)

    def test_secret_values_are_redacted_from_stderr(self):
        # Issue 11 item 7: the traceback the harness itself prints carried
        # the value verbatim. Values with a quote, a backslash, a newline and
        # non-ASCII, in raw, JSON-escaped and repr forms.
        for value in ("s3cr3t-value", 'q"uo\\te\nline-\u00e9\u2603', "it's"):
            with self.subTest(value=value):
                bundle = json.dumps({"acme/api-token": value}).encode()
                ch = {"fd": 3, "refs": ["acme/api-token"]}
                run = harness(request("tp_basic:leaks_secret_forms", secret_channel=ch), secret=bundle)
                self.refused(run, "provider_error")
                self.assertIn("Traceback", run.stderr)
                self.assertIn("[redacted]", run.stderr)
                for form in secret_forms(value):
                    self.assertNotIn(form, run.stderr)
                    self.assertNotIn(form, run.stdout)
                run = harness(request("tp_basic:leaks_secret", secret_channel=ch), secret=bundle)
                self.refused(run, "provider_error")
                for form in secret_forms(value):
                    self.assertNotIn(form, run.stderr)
                    self.assertNotIn(form, run.stdout)

    def test_secret_unavailable(self):
        ch = {"fd": 3, "refs": ["acme/api-token"]}
        cases = {
            "not json": (b"{not json", "not a JSON object"),
            "not an object": (b"[1]", "not a JSON object"),
            "missing ref": (b'{"other": "x"}', "missing 'acme/api-token'"),
            "extra ref": (b'{"acme/api-token": "x", "other": "y"}', "not requested 'other'"),
            "not a string": (b'{"acme/api-token": 5}', "not a string"),
            "duplicate key": (b'{"acme/api-token": "a", "acme/api-token": "b"}', "not a JSON object"),
            "too large": (json.dumps({"acme/api-token": "x" * 70000}).encode(), "larger than 65536"),
            "empty": (b"", "not a JSON object"),
        }
        for name, (secret, why) in cases.items():
            with self.subTest(name):
                run = harness(request("tp_basic:uses_secret", secret_channel=ch), secret=secret)
                msg = self.refused(run, "secret_unavailable")
                self.assertIn(why, msg)
                self.assertNotIn("xxxx", msg)
        # The channel names fd 3 but nothing was passed there.
        msg = self.refused(harness(request("tp_basic:uses_secret", secret_channel=ch)), "secret_unavailable")
        self.assertIn("not open", msg)
        msg = self.refused(harness(request("tp_basic:uses_secret", secret_channel={"fd": 9, "refs": ["a"]})), "secret_unavailable")
        self.assertIn("fd 9", msg)

    def test_bad_requests(self):
        good = request("tp_basic:echo")
        cases = {
            "empty stdin": b"",
            "blank line": b"\n",
            "not json": b"{nope\n",
            "not an object": b"[]\n",
            "not utf-8": b'{"run_id": "\xff"}\n',
            "NaN": json.dumps(dict(good, input=float("nan"))).encode() + b"\n",
            "duplicate key": b'{"run_id": "a", "run_id": "b"}\n',
        }
        for name, raw in cases.items():
            with self.subTest(name):
                self.refused(harness(raw), "bad_request", run_id=None)
        over = {
            "protocol 2": {"protocol_version": 2},
            "protocol true": {"protocol_version": True},
            "protocol string": {"protocol_version": "1"},
            "empty entrypoint": {"entrypoint": ""},
            "object without colon": {"object": "tp_basic.echo"},
            "object two colons": {"object": "a:b:c"},
            "object not identifier": {"object": "tp-basic:echo"},
            "channel fd 1": {"secret_channel": {"fd": 1, "refs": ["a"]}},
            "channel no refs": {"secret_channel": {"fd": 3, "refs": []}},
            "channel dup refs": {"secret_channel": {"fd": 3, "refs": ["a", "a"]}},
            "channel extra key": {"secret_channel": {"fd": 3, "refs": ["a"], "path": "/x"}},
            "budget negative": {"budgets": {"timeout_ms": -1}},
            "budget unknown": {"budgets": {"cpu": 1}},
            "budget bool": {"budgets": {"timeout_ms": True}},
            "egress not list": {"egress_declared": "https://x"},
            "idempotency int": {"idempotency_key": 5},
            "unknown key": {"extra": 1},
        }
        for name, o in over.items():
            with self.subTest(name):
                self.refused(harness(dict(good, **o)), "bad_request")
        for key in good:
            if key == "run_id":
                continue
            with self.subTest(missing=key):
                req = dict(good)
                del req[key]
                self.assertIn(key, self.refused(harness(req), "bad_request"))
        req = dict(good)
        del req["run_id"]
        self.refused(harness(req), "bad_request", run_id=None)

    def test_cannot_write_result_exits_nonzero_not_78(self):
        run = harness(request("tp_basic:echo"), close_stdout=True)
        self.assertNotEqual(run.code, 0)
        self.assertNotEqual(run.code, 78)
        self.assertIn("cannot write the result", run.stderr)

    def test_lingering_thread_does_not_hold_the_exit(self):
        self.ok(harness(request("tp_basic:lingering_thread")), "done")

    # Start-up code: site runs the venv's .pth files (and sitecustomize)
    # before the harness's first line. With the channel on fd 1 what they
    # printed or wrote there went into the result; the executor starts a
    # runtime from 0.2.0 on with fd 1 on stderr and the channel elsewhere.

    def test_startup_code_cannot_write_the_result(self):
        run = harness(request("tp_basic:echo"), env={"CRUX_TEST_STARTUP": "print"})
        self.ok(run, {"echo": {"name": "world"}})
        self.assertIn("printed at start-up", run.stderr)
        self.assertIn("written on fd 1 at start-up", run.stderr)

    def test_startup_code_that_raises_is_reported_and_the_run_goes_on(self):
        run = harness(request("tp_basic:echo"), env={"CRUX_TEST_STARTUP": "raise"})
        self.ok(run, {"echo": {"name": "world"}})
        self.assertIn("ZeroDivisionError", run.stderr)

    def test_startup_code_that_exits_ends_the_interpreter(self):
        # sys.exit in a .pth ends the interpreter's start (CPython: "Fatal
        # Python error: init_import_site", exit 1) before the harness runs:
        # no result, the exit and the traceback on stderr (harness_exited).
        run = harness(request("tp_basic:echo"), env={"CRUX_TEST_STARTUP": "exit"})
        self.assertEqual(run.code, 1, run.stderr)
        self.assertEqual(run.stdout, "")
        self.assertIn("SystemExit: 7", run.stderr)

    def test_channel_on_fd_1_still_runs(self):
        # As an env with a runtime from before 0.2.0 is run, and as by hand:
        # without the variable the harness moves fd 1 off itself.
        self.ok(harness(request("tp_basic:echo"), handoff=False), {"echo": {"name": "world"}})

    def test_provider_sees_the_start_minus_m_gives(self):
        # The same sys.argv, sys.orig_argv, sys.executable, sys.flags, prefix,
        # path, locale and streams as with the channel on fd 1 (a plain
        # start), and so do its multiprocessing children (spawn,
        # forkserver): .pth files run in them too.
        def info(handoff):
            run = harness(request("tp_start:full"), handoff=handoff)
            self.assertEqual(run.code, 0, run.stderr)
            self.assertEqual(run.doc["status"], "ok", run.doc)
            return run.doc["result"]

        want, got = info(False), info(True)
        self.assertEqual(got["self"]["flags"]["no_site"], 0)
        self.assertTrue(got["self"]["argv"][0].endswith("harness.py"), got["self"]["argv"])
        self.assertGreater(got["self"]["pth_ran"], 0)
        for method in ("spawn", "forkserver"):
            child = got["children"][method]
            self.assertEqual(child["flags"]["no_site"], 0, method)
            self.assertEqual(child["prefix"], got["self"]["prefix"], method)
            self.assertGreater(child["pth_ran"], 0, method)
        self.assertEqual(got, want)

    def test_multiprocessing_tempdir_removed(self):
        # The harness ends by os._exit, which runs no atexit hook: the
        # directory multiprocessing makes for a forkserver's socket
        # (pymp-*) stayed in the temporary directory after every run that
        # started a child by spawn or forkserver. The harness removes it.
        tmp = tempfile.mkdtemp(prefix="tmp-", dir=TMP)
        for handoff in (True, False):
            with self.subTest(handoff=handoff):
                run = harness(request("tp_start:full"), env={"TMPDIR": tmp}, handoff=handoff)
                self.assertEqual(run.code, 0, run.stderr)
                self.assertEqual(run.doc["status"], "ok", run.doc)
                self.assertEqual(os.listdir(tmp), [])

    def test_channel_and_variable_do_not_reach_provider_subprocesses(self):
        # The executor hands the channel over as an inheritable descriptor
        # named by CRUXIBLE_PROTOCOL_FD; the harness removes the variable
        # and makes the descriptor non-inheritable before provider code
        # runs, so a subprocess (even with close_fds=False) gets neither.
        run = harness(request("tp_start:fds"))
        self.assertEqual(run.code, 0, run.stderr)
        got = run.doc["result"]
        self.assertIsNone(got["var"])
        self.assertIsNone(got["child_var"])
        self.assertEqual(got["inheritable"], [0, 1, 2])
        self.assertLessEqual(len(got["child_fds"]), 4, got)  # 0, 1, 2 and listdir's own

    def test_bad_channel_variable_is_no_result(self):
        # A variable that names no descriptor the executor could have
        # handed over writes no result anywhere.
        for v in ("99", "1", "x"):
            with self.subTest(v=v):
                run = harness(request("tp_basic:echo"), handoff=False, env={"CRUXIBLE_PROTOCOL_FD": v})
                self.assertEqual(run.code, 1, run.stderr)
                self.assertEqual(run.stdout, "")
                self.assertIn("stdout is not usable", run.stderr)

    def test_handoff_leaves_the_start_python_minus_I_gives(self):
        # The start must be what python -I gives any program: sys.prefix,
        # sys.path (the venv's site-packages, not the base's), no user
        # site; and the same with the channel on fd 1, multiprocessing
        # children included. On every CPython 3.9+ here that this user can
        # run.
        pys = [sys.executable, "/usr/bin/python3"]
        pys += ["/root/.pyenv/versions/%s/bin/python3" % v for v in ("3.9.18", "3.10.13", "3.11.7", "3.12.1", "3.13.0")]
        tried = 0
        for base in pys:
            if not os.access(base, os.X_OK):
                continue
            with self.subTest(python=base):
                d = tempfile.mkdtemp(prefix="crux-start-", dir=TMP)
                if subprocess.run([base, "-m", "venv", "--without-pip", d], capture_output=True).returncode != 0:
                    continue
                tried += 1
                py = os.path.join(d, "bin", "python")
                site = subprocess.run([py, "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                      check=True, capture_output=True, text=True).stdout.strip()
                with open(os.path.join(site, "crux_test_paths.pth"), "w") as f:
                    f.write(PYROOT + "\n" + os.path.join(TMP, "providers") + "\n")
                want = json.loads(subprocess.run([py, "-I", "-c", START_INFO + "print(json.dumps(info))"],
                                                 check=True, capture_output=True, cwd=TMP).stdout)
                self.assertIn(site, want["path"])
                run = harness(request("tp_start:info_"), py=py)
                self.assertEqual(run.code, 0, run.stderr)
                self.assertEqual(run.doc["status"], "ok", run.doc)
                self.assertEqual(run.doc["result"], want)
                full = [harness(request("tp_start:full"), py=py, handoff=h) for h in (False, True)]
                for r in full:
                    self.assertEqual(r.code, 0, r.stderr)
                self.assertEqual(full[1].doc, full[0].doc)
        self.assertGreater(tried, 0)


# The harness as the first process of a pid namespace of its own (pid 1 of
# a new user and pid namespace, made with unshare(2) through ctypes), whose
# fork of its init fails: the executor's SIGTERM comes while the harness has
# the signals blocked to fork (sent here by the process itself, at the
# moment it restores its mask). Exit 77: the kernel refused the namespaces.
PID1_FORK_FAILS = """
import ctypes, os, signal, sys
sys.path.insert(0, %r)
libc = ctypes.CDLL(None, use_errno=True)
if libc.unshare(0x10000000 | 0x20000000) != 0:  # CLONE_NEWUSER | CLONE_NEWPID
    sys.exit(77)
child = os.fork()
if child == 0:
    from cruxible_provider_runtime import harness

    def fork():
        raise OSError(11, "Resource temporarily unavailable")

    real = signal.pthread_sigmask

    def sigmask(how, sigs):
        if how == signal.SIG_SETMASK:
            os.kill(os.getpid(), signal.SIGTERM)
        return real(how, sigs)

    os.fork, signal.pthread_sigmask = fork, sigmask
    assert os.getpid() == 1
    harness._init_in_front()
    os._exit(0)  # the SIGTERM was dropped: the harness runs on
_, status = os.waitpid(child, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"""


class InitInFrontTests(unittest.TestCase):
    def test_fork_failure_keeps_a_sigterm_that_came_while_it_forked(self):
        # The harness that cannot fork its init runs as pid 1 with a
        # SIGTERM handler; it restored its signal mask before installing
        # it, and a SIGTERM that came while it forked (pending, blocked)
        # was then delivered to no handler, which the first process of a
        # namespace drops: the provider ran to the executor's SIGKILL.
        r = subprocess.run([sys.executable, "-I", "-c", PID1_FORK_FAILS % PYROOT], capture_output=True, text=True)
        if r.returncode == 77:
            self.skipTest("the kernel refuses a user and pid namespace here")
        self.assertEqual(r.returncode, 128 + 15, r.stderr)


if __name__ == "__main__":
    unittest.main()
