"""The harness an executor runs: ``python -I -m cruxible_provider_runtime.harness``.

An executor that knows this runtime (0.2.0 on) starts it with fd 1 already on
stderr and the protocol channel on another descriptor, which the variable
CRUXIBLE_PROTOCOL_FD names: site runs the env's .pth files and sitecustomize
(start-up code, provider code) before the harness's first line, and what
they print cannot reach the result. The harness takes the channel from the
variable (step 1), which it removes from its environment, making the
descriptor non-inheritable, before anything else. Run without the variable
(an older executor, by hand), it moves fd 1 itself, once site has run.

The contract is DESIGN section 10 and docs/provider-authors.md:

1. First of all, the protocol channel moves off fd 1: fd 1 is duplicated to a
   private, non-inheritable descriptor, then fd 1 (and sys.stdout) point at
   stderr, so nothing a provider prints, from Python or from C, reaches the
   result. Handed the channel by the executor (CRUXIBLE_PROTOCOL_FD), the
   harness takes that descriptor instead of duplicating fd 1.
2. One JSON line is read from stdin::

       {"protocol_version": 1, "run_id": "...", "entrypoint": "...",
        "object": "module:attr", "input": ..., "secret_channel": {"fd": 3,
        "refs": ["..."]} | null, "budgets": {"timeout_ms": N,
        "output_bytes": N}, "egress_declared": ["..."],
        "idempotency_key": "..." | null}

   Every key is required and no other is accepted. Anything else is a
   ``bad_request`` result.
3. When secret_channel is not null, the secret bundle (a JSON object
   {ref: string}, at most 64 KiB) is read from that descriptor to EOF and
   the descriptor is closed; a missing, unreadable or invalid bundle, or
   one whose refs differ from the request's, is ``secret_unavailable``.
   stdin is then pointed at /dev/null.
4. ``module:attr`` is imported (any failure, or an object that is not
   callable, is ``import_failed``). A class is instantiated with no
   arguments and the instance called with the ProviderRunContext; any
   other callable is called with it. An exception (SystemExit included) is
   ``provider_error``: its type and message go into the result, its
   traceback to stderr. A return that is not a valid ProviderResult is
   ``result_invalid``.
5. Exactly one JSON line is written on the protocol channel::

       {"status": "ok", "run_id": ..., "result": ..., "egress": [...]}
       {"status": "error", "run_id": ..., "error": {"code": ..., "message": ...}, "egress": [...]}

   run_id is the request's (null when the request had none). Neither
   error messages nor egress URLs contain a delivered secret value (each
   is replaced by "[redacted]"), nor does anything the harness itself
   writes to stderr (its tracebacks and log lines): every value is
   redacted there too, in its raw, JSON-escaped and repr forms. What a
   provider writes to stderr itself is not filtered: the executor redacts
   the stderr tail it keeps.

The harness exits 0 whenever it wrote a result, ok or error, and non-zero only
when it could not write one: 74 when provider code closed the result channel
(the private descriptor of step 1: os.closerange(3, ...), as daemonizing
libraries do; it is not written to then, since its number may have been
reused by a file of the provider's), 1 otherwise. It never exits 78 (reserved
for the container shim).

Started as the first process of a pid namespace (pid 1: an executor's
containment with no init of its own; in a container cruxshim is the init and
starts the harness as its child), it first forks a minimal init in front of itself
(_init_in_front), so that signals and orphans behave as they do anywhere
else; the init exits with the harness's status, 128+N for a death by signal N.

The harness ends by os._exit, so no atexit hook of the provider's runs; it
removes what multiprocessing's would have, its temporary directory (pymp-*,
where a forkserver's socket is), which was otherwise left in the provider's
temporary directory (/tmp unless the executor passes TMPDIR) by every run
that started a process by spawn or forkserver (_remove_multiprocessing_tempdir).
"""

from __future__ import annotations

import bisect
import importlib
import json
import os
import signal
import sys
import traceback

from cruxible_provider_runtime.provider_api import (
    PROTOCOL_VERSION,
    Budgets,
    ProviderResult,
    ProviderRunContext,
)

MAX_SECRET_BUNDLE = 64 * 1024
"""The largest secret bundle read, in bytes (DESIGN section 10)."""

MAX_MESSAGE = 2000
"""Messages the harness builds from exceptions are cut to this many characters."""

REQUEST_KEYS = (
    "protocol_version",
    "run_id",
    "entrypoint",
    "object",
    "input",
    "secret_channel",
    "budgets",
    "egress_declared",
    "idempotency_key",
)
BUDGET_KEYS = ("timeout_ms", "output_bytes")


class _Refused(Exception):
    """An error result the harness gives: code and message."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


_SECRET_FORMS: list = []
"""Every form of every delivered secret value, longest first (_set_secrets)."""


def _forms(value: str):
    """The forms a value takes in text: raw, JSON-escaped (ASCII escapes or
    not), repr and ascii, each without its quotes."""
    out = {value, repr(value)[1:-1], ascii(value)[1:-1]}
    for ensure_ascii in (True, False):
        try:
            out.add(json.dumps(value, ensure_ascii=ensure_ascii)[1:-1])
        except (ValueError, UnicodeError):
            pass
    return out


def _set_secrets(secrets) -> None:
    forms = set()
    for v in secrets.values():
        if v:
            forms |= _forms(v)
    _SECRET_FORMS[:] = sorted((f for f in forms if f), key=lambda f: (-len(f), f))


_MARKER = "[redacted]"


def _merge(spans: list) -> list:
    """spans (start, end) sorted, those that overlap (not those that only
    touch) merged."""
    out: list = []
    for lo, hi in sorted(spans):
        if out and lo < out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def _overlaps(spans: list, ends: list, m: tuple) -> bool:
    """Whether m overlaps one of spans (sorted, disjoint; ends their ends)."""
    k = bisect.bisect_right(ends, m[0])
    return k < len(spans) and spans[k][0] < m[1]


def _redact(msg: str) -> str:
    """msg with every form of every delivered secret value replaced by
    "[redacted]", in one pass over msg: every occurrence of every form
    (overlapping ones too) is found, ranges that overlap are merged, and
    each is replaced once. Replacing form after form redacted a short
    secret's letters in the markers a longer one had left ("e" made
    "[r[redacted]d[redacted]ct[redacted]d]"), and of two secrets sharing
    characters ("abc", "bcd" in "abcd") left the rest of the second. A
    marker already in msg stays one: a match inside it is no secret's, a
    range overlapping it takes all of it."""
    if not _SECRET_FORMS:
        return msg
    spans = []
    for f in _SECRET_FORMS:
        i = msg.find(f)
        while i >= 0:
            spans.append((i, i + len(f)))
            i = msg.find(f, i + 1)
    if not spans:
        return msg
    spans = _merge(spans)
    marks = []
    i = msg.find(_MARKER)
    while i >= 0:
        marks.append((i, i + len(_MARKER)))
        i = msg.find(_MARKER, i + len(_MARKER))
    if marks:
        his = [m[1] for m in marks]
        kept = []
        for lo, hi in spans:
            k = bisect.bisect_left(his, hi)
            if k < len(marks) and marks[k][0] <= lo:
                continue  # inside a marker
            kept.append((lo, hi))
        ends = [x[1] for x in kept]
        joined = [m for m in marks if _overlaps(kept, ends, m)]
        spans = _merge(kept + joined)
    out, at = [], 0
    for lo, hi in spans:
        out.append(msg[at:lo])
        out.append(_MARKER)
        at = hi
    out.append(msg[at:])
    return "".join(out)


def _log(msg: str) -> None:
    try:
        sys.stderr.write(_redact("cruxible_provider_runtime.harness: %s\n" % msg))
        sys.stderr.flush()
    except Exception:
        pass


def _print_traceback() -> None:
    """Print the current exception's traceback on stderr, redacted of every
    delivered secret value (the message of an exception often quotes one)."""
    try:
        text = "".join(traceback.format_exc())
        sys.stderr.write(_redact(text))
        sys.stderr.flush()
    except Exception:
        pass  # stderr closed or replaced by the provider: the result matters more


def _short(msg: str) -> str:
    msg = msg.encode("utf-8", "backslashreplace").decode("utf-8")
    if len(msg) > MAX_MESSAGE:
        msg = msg[: MAX_MESSAGE - 3] + "..."
    return msg


def _describe(exc: BaseException) -> str:
    """"Type: message", redacted before it is cut to MAX_MESSAGE (a value
    cut first would keep its start)."""
    try:
        text = str(exc)
    except BaseException:  # a provider's __str__ that raises: name the type still
        text = "<exception str() failed>"
    name = type(exc).__name__
    return _short(_redact("%s: %s" % (name, text) if text else name))


PROTOCOL_FD_VAR = "CRUXIBLE_PROTOCOL_FD"
"""The variable through which the executor names the protocol channel it
handed over on a descriptor of its own, fd 1 being stderr from the
interpreter's start, before the env's start-up code ran."""


def _take_channel():
    """The protocol channel the executor handed over: its descriptor, None
    without the variable (run as plain -m), or the OSError that makes it
    unusable. The variable leaves the environment (provider code and its
    subprocesses never see it) and the descriptor becomes non-inheritable
    (provider subprocesses never get it) before anything else."""
    v = os.environ.pop(PROTOCOL_FD_VAR, None)
    if v is None:
        return None
    if not (v.isascii() and v.isdigit()) or int(v) < 3:
        return OSError("%s=%r names no descriptor the executor could have handed over" % (PROTOCOL_FD_VAR, v))
    fd = int(v)
    try:
        os.set_inheritable(fd, False)
    except OSError as e:
        return e
    return fd


def _protect_stdout(proto=None) -> int:
    """Duplicate fd 1 to a private, non-inheritable descriptor, unless the
    executor handed the channel over (proto), and point fd 1 and sys.stdout
    at stderr (again, when handed over: start-up code may have pointed them
    elsewhere). A channel handed over moves to the lowest free descriptor
    when that is lower, so that the provider finds the descriptors where a
    channel on fd 1 would have left them (the secret's fd 3, when the run
    has none, is then the channel's, as ever)."""
    if proto is None:
        proto = os.dup(1)  # non-inheritable (PEP 446)
    elif isinstance(proto, BaseException):
        raise proto
    else:
        low = os.dup(proto)  # non-inheritable (PEP 446)
        if low < proto:
            os.close(proto)
            proto = low
        else:
            os.close(low)
    try:
        sys.stdout.flush()
    except Exception:
        pass
    try:
        os.dup2(2, 1)
    except OSError:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)
    sys.stdout = sys.stderr
    return proto


def _read_line(fd: int) -> bytes:
    chunks = []
    while True:
        b = os.read(fd, 65536)
        if not b:
            break
        nl = b.find(b"\n")
        if nl >= 0:
            chunks.append(b[:nl])
            break
        chunks.append(b)
    return b"".join(chunks)


def _no_duplicates(pairs):
    d = {}
    for k, v in pairs:
        if k in d:
            raise ValueError("duplicate key %r" % k)
        d[k] = v
    return d


def _no_constants(name):
    raise ValueError("%s is not JSON" % name)


def _loads(data: bytes):
    return json.loads(
        data.decode("utf-8"),
        object_pairs_hook=_no_duplicates,
        parse_constant=_no_constants,
    )


def _is_int(v) -> bool:
    return type(v) is int


def _check_object_ref(ref) -> bool:
    if type(ref) is not str or ref.count(":") != 1:
        return False
    module, attr = ref.split(":")
    parts = module.split(".") + attr.split(".")
    return all(p.isidentifier() for p in parts)


def _parse_request(raw: bytes, run_id_out: list):
    if not raw.strip():
        raise _Refused("bad_request", "no request line on stdin")
    try:
        req = _loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise _Refused("bad_request", "request is not one JSON line: %s" % _short(str(e)))
    if type(req) is not dict:
        raise _Refused("bad_request", "request is not a JSON object")
    if type(req.get("run_id")) is str:
        run_id_out.append(req["run_id"])
    for k in REQUEST_KEYS:
        if k not in req:
            raise _Refused("bad_request", "request has no %r" % k)
    for k in req:
        if k not in REQUEST_KEYS:
            raise _Refused("bad_request", "request has unknown key %r" % _short(k))
    pv = req["protocol_version"]
    if not _is_int(pv):
        raise _Refused("bad_request", "protocol_version must be an integer")
    if pv != PROTOCOL_VERSION:
        raise _Refused("bad_request", "protocol_version %d is not supported (this runtime speaks %d)" % (pv, PROTOCOL_VERSION))
    for k in ("run_id", "entrypoint"):
        if type(req[k]) is not str or not req[k]:
            raise _Refused("bad_request", "%s must be a non-empty string" % k)
    if not _check_object_ref(req["object"]):
        raise _Refused("bad_request", "object must be 'module:attr' (dotted Python identifiers), got %r" % (_short(str(req["object"])),))
    ch = req["secret_channel"]
    if ch is not None:
        if type(ch) is not dict or set(ch) != {"fd", "refs"}:
            raise _Refused("bad_request", "secret_channel must be null or {fd, refs}")
        if not _is_int(ch["fd"]) or ch["fd"] < 3:
            raise _Refused("bad_request", "secret_channel.fd must be an integer >= 3")
        refs = ch["refs"]
        if type(refs) is not list or not refs or any(type(r) is not str or not r for r in refs):
            raise _Refused("bad_request", "secret_channel.refs must be a non-empty list of non-empty strings (no secrets: the channel is null)")
        if len(set(refs)) != len(refs):
            raise _Refused("bad_request", "secret_channel.refs has duplicates")
    b = req["budgets"]
    if type(b) is not dict:
        raise _Refused("bad_request", "budgets must be an object")
    for k, v in b.items():
        if k not in BUDGET_KEYS:
            raise _Refused("bad_request", "budgets has unknown key %r" % _short(k))
        if v is not None and (not _is_int(v) or v < 0):
            raise _Refused("bad_request", "budgets.%s must be a non-negative integer or null" % k)
    eg = req["egress_declared"]
    if type(eg) is not list or any(type(u) is not str for u in eg):
        raise _Refused("bad_request", "egress_declared must be a list of strings")
    ik = req["idempotency_key"]
    if ik is not None and type(ik) is not str:
        raise _Refused("bad_request", "idempotency_key must be a string or null")
    return req


def _read_secrets(channel, proto_fd: int):
    fd = channel["fd"]
    refs = channel["refs"]
    if fd == proto_fd:
        # The descriptor named was not open when the harness started: its
        # number went to the protocol channel.
        raise _Refused("secret_unavailable", "secret channel fd %d is not open" % fd)
    try:
        try:
            # A file (the shim's memory copy, a `3<file` redirect) is read
            # from its start; a pipe cannot seek and is read as it comes.
            os.lseek(fd, 0, os.SEEK_SET)
        except OSError:
            pass
        chunks = []
        total = 0
        while True:
            b = os.read(fd, 65536)
            if not b:
                break
            chunks.append(b)
            total += len(b)
            if total > MAX_SECRET_BUNDLE:
                raise _Refused("secret_unavailable", "secret bundle on fd %d is larger than %d bytes" % (fd, MAX_SECRET_BUNDLE))
    except OSError as e:
        raise _Refused("secret_unavailable", "cannot read the secret bundle from fd %d: %s" % (fd, e.strerror or e))
    finally:
        try:
            os.close(fd)
        except OSError:
            pass
    try:
        bundle = _loads(b"".join(chunks))
    except (ValueError, UnicodeDecodeError, RecursionError):
        # The message of a JSON error can quote the bundle: say nothing more.
        raise _Refused("secret_unavailable", "the secret bundle on fd %d is not a JSON object" % fd)
    if type(bundle) is not dict:
        raise _Refused("secret_unavailable", "the secret bundle on fd %d is not a JSON object" % fd)
    for k, v in bundle.items():
        if type(v) is not str:
            raise _Refused("secret_unavailable", "secret %r in the bundle is not a string" % _short(k))
    missing = sorted(set(refs) - set(bundle))
    extra = sorted(set(bundle) - set(refs))
    if missing or extra:
        parts = []
        if missing:
            parts.append("missing %s" % ", ".join(repr(_short(r)) for r in missing))
        if extra:
            parts.append("not requested %s" % ", ".join(repr(_short(r)) for r in extra))
        raise _Refused("secret_unavailable", "the secret bundle does not match secret_channel.refs: %s" % "; ".join(parts))
    return bundle


def _stdin_to_devnull() -> None:
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
    except OSError:
        pass


def _resolve(ref: str):
    module_name, attr_path = ref.split(":")
    try:
        target = importlib.import_module(module_name)
        for part in attr_path.split("."):
            target = getattr(target, part)
    except BaseException as e:
        _print_traceback()
        raise _Refused("import_failed", "cannot import %s: %s" % (ref, _describe(e)))
    if not callable(target):
        raise _Refused("import_failed", "%s is a %s, not a class or callable" % (ref, type(target).__name__))
    return target


def _call(target, ref: str, ctx: ProviderRunContext):
    try:
        if isinstance(target, type):
            instance = target()
            if not callable(instance):
                raise TypeError("instances of %s are not callable (define __call__(self, ctx))" % ref)
            return instance(ctx)
        return target(ctx)
    except BaseException as e:
        _print_traceback()
        raise _Refused("provider_error", _describe(e))


def _check_result(out, ref: str) -> dict:
    # Nothing about the returned object is asked outside a try: an
    # object whose attributes raise (a lazy object, a context-bound proxy
    # used outside its context: hasattr and isinstance let that through)
    # left the harness without a result to write (exit 1, harness_exited).
    try:
        is_result = isinstance(out, ProviderResult)
    except BaseException:
        is_result = False
    if not is_result:
        hint = ""
        try:
            if hasattr(out, "__await__") or hasattr(out, "send") and hasattr(out, "throw"):
                hint = " (async entrypoints are not supported: return the result itself)"
                close = getattr(out, "close", None)
                if callable(close):
                    close()
        except BaseException:
            pass
        raise _Refused("result_invalid", "%s returned %s, not a ProviderResult%s" % (ref, type(out).__name__, hint))
    try:
        # Read through ProviderResult's own slots and checked by its own
        # check(): a subclass that overrides check() or a property is not
        # asked, so what it returns is checked as any other (an unchecked
        # code or a message that is not a str went out as the harness's
        # and read as protocol_error; an egress entry that was not text
        # left the harness unable to write any result).
        plain = ProviderResult(*(ProviderResult.__dict__[n].__get__(out) for n in ProviderResult.__slots__))
        ProviderResult.check(plain)
        if plain._status == "ok":
            return {"status": "ok", "result": plain._result}
        return {"status": "error", "error": {"code": str(plain._code), "message": str(plain._message)}}
    except BaseException as e:
        raise _Refused("result_invalid", "%s returned an invalid ProviderResult: %s" % (ref, _describe(e)))


def _egress(ctx) -> list:
    """The run's egress log, each URL once and redacted; _Refused
    (result_invalid) when it is not a list of one-line texts (provider
    code wrote the log's private list itself, or replaced the log)."""
    if ctx is None:
        return []
    try:
        urls = list(ctx.egress.urls)
        out = []
        for u in urls:
            if type(u) is not str or not u or "\n" in u or "\r" in u:
                raise ValueError("an entry is a %s, not one line of text" % type(u).__name__)
            u.encode("utf-8")
            u = _redact(u)
            if u not in out:
                out.append(u)
        return out
    except BaseException as e:
        raise _Refused("result_invalid", "the run's egress log cannot be written: %s (record URLs with ctx.egress.record)" % _describe(e))


def _encode(doc: dict) -> bytes:
    return json.dumps(doc, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8") + b"\n"


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


EXIT_CHANNEL_CLOSED = 74
"""The exit status when provider code closed the result channel, so that no
result could be written (sysexits' EX_IOERR; the executor records a
protocol_error saying so)."""


def _identity(fd: int):
    """What a descriptor is open on: (device, inode) of its file or pipe."""
    st = os.fstat(fd)
    return (st.st_dev, st.st_ino)


def _on_sigterm(signum, frame) -> None:
    os._exit(128 + signum)


_FORWARDED = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")
"""The signals the init in front of the harness passes on to it."""


def _init_in_front() -> None:
    """When the harness is the first process of a pid namespace (pid 1: an
    executor's containment with no init of its own; cruxshim is a
    container's init and starts the harness as its child), fork, so that the harness and the
    provider run as an ordinary process and the first one is a minimal init.

    The kernel ignores every signal a namespace's first process has no
    handler for, those it sends itself included: as pid 1 a provider's
    os.kill(os.getpid(), SIGTERM) or SIGKILL did nothing, and os.abort()
    ended in SIGSEGV; and the orphans re-parented to pid 1 stayed zombies
    (against the container's pids limit), since nothing reaped them. The
    init reaps every child, passes the _FORWARDED signals on to the harness
    (a container runtime signals pid 1 only), and exits as the harness did:
    its exit status, or 128+N when signal N killed it, as a shell, bwrap
    and the container runtimes report it. It holds none of the run's
    descriptors but stderr. Where the fork fails the harness runs as pid 1,
    with a SIGTERM handler so that the executor's SIGTERM still ends it,
    one that came while it forked included (installed before the signals
    are unblocked)."""
    if os.getpid() != 1:
        return
    sigs = [getattr(signal, n) for n in _FORWARDED if hasattr(signal, n)]
    try:
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
    except (OSError, ValueError, AttributeError):
        mask = None
    try:
        child = os.fork()
    except OSError as e:
        child = -1
        _log("cannot fork an init in front of the harness, which runs as the pid namespace's first process: %s" % e)
    if child <= 0:
        if child < 0:
            # Before the mask goes: a SIGTERM that came while it forked
            # is pending, and a first process drops one it has no
            # handler for when it is unblocked.
            try:
                signal.signal(signal.SIGTERM, _on_sigterm)
            except (OSError, ValueError):
                pass
        if mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        return
    try:
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        os.closerange(3, max(os.sysconf("SC_OPEN_MAX"), 1024))
    except (OSError, ValueError):
        pass

    def forward(signum, frame):
        try:
            os.kill(child, signum)
        except OSError:
            pass

    for sig in sigs:
        try:
            signal.signal(sig, forward)
        except (OSError, ValueError):
            pass
    if mask is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(1)  # the harness is gone without a status: cannot happen
        if pid != child:
            continue  # an orphan, reaped
        if os.WIFSIGNALED(status):
            os._exit(128 + os.WTERMSIG(status))
        if os.WIFEXITED(status):
            os._exit(os.WEXITSTATUS(status))


def run(proto=None) -> int:
    """Run one request; return the exit status (0: a result was written).

    proto is _take_channel's: the channel the executor handed over (or
    why it cannot be used); None, the harness moves fd 1 itself."""
    try:
        proto_fd = _protect_stdout(proto)
        proto_id = _identity(proto_fd)
    except OSError as e:
        _log("stdout is not usable, no result can be written: %s" % e)
        return 1

    run_id_box: list = []
    secrets: dict = {}
    ctx = None
    try:
        try:
            raw = _read_line(0)
        except OSError as e:
            raise _Refused("bad_request", "cannot read the request from stdin: %s" % (e.strerror or e))
        req = _parse_request(raw, run_id_box)
        if req["secret_channel"] is not None:
            secrets = _read_secrets(req["secret_channel"], proto_fd)
            _set_secrets(secrets)
        _stdin_to_devnull()
        budgets = req["budgets"]
        ctx = ProviderRunContext(
            input=req["input"],
            secrets=secrets,
            budgets=Budgets(budgets.get("timeout_ms"), budgets.get("output_bytes")),
            run_id=req["run_id"],
            entrypoint=req["entrypoint"],
            egress_declared=req["egress_declared"],
            idempotency_key=req["idempotency_key"],
            protocol_version=req["protocol_version"],
        )
        target = _resolve(req["object"])
        out = _call(target, req["object"], ctx)
        body = _check_result(out, req["object"])
    except _Refused as r:
        body = {"status": "error", "error": {"code": r.code, "message": r.message}}

    # Receipts keep the observed egress: no secret value may ride in a URL.
    try:
        egress = _egress(ctx)
    except _Refused as r:
        egress = []
        if body["status"] == "ok":
            body = {"status": "error", "error": {"code": r.code, "message": r.message}}
    if body["status"] == "error":
        body["error"]["message"] = _redact(body["error"]["message"])
    doc = {"status": body["status"], "run_id": run_id_box[0] if run_id_box else None}
    if body["status"] == "ok":
        doc["result"] = body["result"]
    else:
        doc["error"] = body["error"]
    doc["egress"] = egress
    try:
        line = _encode(doc)
    except (ValueError, TypeError, UnicodeEncodeError, RecursionError) as e:
        doc.pop("result", None)
        doc["status"] = "error"
        doc["error"] = {"code": "result_invalid", "message": _redact("the result cannot be encoded as JSON: %s" % _describe(e))}
        line = _encode(doc)
    try:
        intact = _identity(proto_fd) == proto_id
    except OSError:
        intact = False
    if not intact:
        # Closed by provider code (os.closerange(3, ...), a daemonizing
        # library), its number perhaps reused by a file of the provider's
        # that the result must not go into.
        _log("provider code closed the result channel (fd %d: os.closerange(3, ...), as daemonizing libraries do, "
             "or os.close), so no result can be written; keep descriptors you did not open" % proto_fd)
        return EXIT_CHANNEL_CLOSED
    try:
        _write_all(proto_fd, line)
        os.close(proto_fd)
    except OSError as e:
        _log("cannot write the result: %s" % e)
        return 1
    return 0


def _remove_multiprocessing_tempdir() -> None:
    """Remove the temporary directory multiprocessing made for this process
    (util.get_temp_dir: pymp-*, a forkserver's socket in it), as its atexit
    hook would have; os._exit runs none. Only a directory of that name:
    provider code may have changed what the process records. Best effort,
    never an exception."""
    try:
        process = sys.modules.get("multiprocessing.process")
        if process is None:
            return
        d = process.current_process()._config.get("tempdir")
        if isinstance(d, str) and os.path.basename(d).startswith("pymp-"):
            import shutil

            shutil.rmtree(d, ignore_errors=True)
    except BaseException:
        pass


def _exit(code: int) -> None:
    _remove_multiprocessing_tempdir()
    for f in (sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            if f is not None:
                f.flush()
        except Exception:
            pass
    # os._exit: a provider's leftover threads or atexit hooks cannot change
    # the status once the result is written.
    os._exit(code)


if __name__ == "__main__":
    _proto = _take_channel()
    _init_in_front()
    try:
        status = run(_proto)
    except BaseException:
        _print_traceback()
        status = 1
    _exit(status)
