"""The API a provider is written against (DESIGN section 10).

A provider's entrypoint object is named ``module:attr`` in its
``provider.toml``. The harness imports it; a class is instantiated with no
arguments and the instance is called with a ProviderRunContext, any other
callable is called with the context directly. The call returns a
ProviderResult::

    from cruxible_provider_runtime import ProviderResult

    def echo(ctx):
        token = ctx.secrets["acme/api-token"]
        ctx.egress.record("https://api.acme.example/echo")
        return ProviderResult.ok({"echo": ctx.input})

This module does no I/O and keeps no global state; a provider's unit tests
can build a ProviderRunContext themselves.
"""

from __future__ import annotations

import math
import types
from typing import Any, Iterable, List, Mapping, Optional, Tuple

PROTOCOL_VERSION = 1
"""The transport envelope version this runtime speaks."""

ERROR_CODES: Tuple[str, ...] = (
    "bad_request",
    "import_failed",
    "provider_error",
    "result_invalid",
    "secret_unavailable",
)
"""The closed set of error codes a result may carry."""

PROVIDER_ERROR_CODES: Tuple[str, ...] = ("bad_request", "provider_error")
"""The codes a provider may return itself: ``bad_request`` when it rejects
its input, ``provider_error`` for every other failure. The others describe
what the harness saw and are the harness's to give."""

MAX_NESTING = 200
"""How deep a result value may nest (JSON arrays and objects)."""


def check_json_value(value: Any, where: str = "result") -> None:
    """Raise ValueError unless value is plain JSON.

    Plain JSON is None, bool, int (of no more digits than
    sys.get_int_max_str_digits() allows), finite float, str (no lone surrogates),
    list of plain JSON, and dict with str keys and plain JSON values,
    nested at most MAX_NESTING deep: values of exactly those types, what
    json.loads gives. Anything else is refused, not converted: a tuple, a
    set, bytes, a subclass (an OrderedDict, an IntEnum), a non-str key, a
    NaN or an infinity. json.dumps would write a tuple as a list and an int
    key as a string, a value the provider did not write: its own tests
    then compare a result the executor never returns. The message says
    where (``result['a'][0]``) and what to pass instead. Cycles are
    refused by the depth bound.
    """
    stack = [(value, where, 0)]
    while stack:
        v, path, depth = stack.pop()
        if depth > MAX_NESTING:
            raise ValueError("%s nests deeper than %d levels" % (path, MAX_NESTING))
        if v is None or v is True or v is False:
            continue
        t = type(v)
        if t is int:
            # json.dumps cannot write an int of more digits than
            # sys.get_int_max_str_digits() (4300 by default, Python 3.11+).
            if v.bit_length() > 14000:
                try:
                    int.__repr__(v)
                except ValueError as e:
                    raise ValueError("%s is an integer too long to write as JSON (%s)" % (path, e)) from None
            continue
        if t is float:
            if not math.isfinite(v):
                raise ValueError("%s is %r, which JSON cannot carry: pass a finite number, or None" % (path, v))
            continue
        if t is str:
            _check_text(v, path)
            continue
        if t is list:
            for i, item in enumerate(v):
                stack.append((item, "%s[%d]" % (path, i), depth + 1))
            continue
        if t is dict:
            for k, item in v.items():
                if type(k) is not str:
                    raise ValueError("%s has a key of type %s; JSON keys are strings: pass str keys (json.dumps would write str(key), a key you did not return)" % (path, type(k).__name__))
                _check_text(k, path + " key")
                stack.append((item, "%s[%r]" % (path, k), depth + 1))
            continue
        raise ValueError("%s is a %s, which is not JSON%s" % (path, t.__name__, _instead(t)))


def _instead(t: type) -> str:
    """What to pass instead of a value of type t, which is not JSON ("" when
    nothing is near). Asked of the type, never the value: a hostile
    object's __class__ or __getattr__ is not called."""
    if issubclass(t, tuple):
        return ": pass a list (JSON has none: json.dumps would write a list, not what you returned)"
    if issubclass(t, (set, frozenset)):
        return ": pass a list (sorted, so that every run writes the same result)"
    if issubclass(t, (bytes, bytearray, memoryview)):
        return ": pass a str (decode text; base64 binary data)"
    for plain in (int, float, str, list, dict):
        if issubclass(t, plain):
            return ": pass a plain %s (%s(value))" % (plain.__name__, plain.__name__)
    return ""


def _check_text(s: str, path: str) -> None:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("%s is not valid Unicode text (lone surrogate)" % path) from None


class ProviderResult:
    """What a provider returns: ``ok(result)`` or ``error(code, message)``.

    Build it with the two class methods, never the constructor.
    """

    __slots__ = ("_status", "_result", "_code", "_message")

    def __init__(self, status: str, result: Any = None, code: Optional[str] = None, message: Optional[str] = None):
        self._status = status
        self._result = result
        self._code = code
        self._message = message

    @classmethod
    def ok(cls, result: Any = None) -> "ProviderResult":
        """A successful result carrying ``result``, which must be plain JSON
        (see check_json_value: a list, not a tuple; no set, bytes or NaN);
        the harness checks it (``result_invalid``), as check() does."""
        return cls("ok", result=result)

    @classmethod
    def error(cls, code: str, message: str) -> "ProviderResult":
        """A failed run: ``code`` is one of PROVIDER_ERROR_CODES, ``message``
        (a str) says why; the harness checks both (``result_invalid``)."""
        return cls("error", code=code, message=message)

    def check(self) -> None:
        """Raise ValueError unless this result is one the harness accepts.

        A provider's own tests can call it; the harness does, and turns the
        ValueError into a ``result_invalid`` error result.
        """
        if self._status == "ok":
            check_json_value(self._result)
            return
        if self._status != "error":
            raise ValueError("status %r is neither ok nor error" % (self._status,))
        if type(self._code) is not str or self._code not in PROVIDER_ERROR_CODES:
            raise ValueError("error code %r is not one a provider may return (%s)" % (self._code, ", ".join(PROVIDER_ERROR_CODES)))
        if type(self._message) is not str:
            raise ValueError("error message must be a str, not %s" % type(self._message).__name__)
        _check_text(self._message, "error message")

    @property
    def status(self) -> str:
        """``ok`` or ``error``."""
        return self._status

    @property
    def result(self) -> Any:
        """The ok payload (None for an error)."""
        return self._result

    @property
    def code(self) -> Optional[str]:
        """The error code (None when ok)."""
        return self._code

    @property
    def message(self) -> Optional[str]:
        """The error message (None when ok)."""
        return self._message

    def __repr__(self) -> str:
        if self._status == "ok":
            return "ProviderResult.ok(%r)" % (self._result,)
        return "ProviderResult.error(%r, %r)" % (self._code, self._message)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ProviderResult):
            return NotImplemented
        return (self._status, self._result, self._code, self._message) == (
            other._status,
            other._result,
            other._code,
            other._message,
        )

    __hash__ = None  # type: ignore[assignment]


class EgressLog:
    """The endpoints a run says it reached, in the order first recorded.

    Recording is not containment: the executor compares what is recorded
    with what the manifest declared and keeps both in the receipt.
    """

    __slots__ = ("_urls", "_seen")

    def __init__(self) -> None:
        self._urls: List[str] = []
        self._seen = set()

    def record(self, url: str) -> None:
        """Record that the run reached ``url`` (a non-empty str). Repeats are kept once."""
        if not isinstance(url, str):
            raise TypeError("egress.record: url must be a str, not %s" % type(url).__name__)
        if not url or "\n" in url or "\r" in url:
            raise ValueError("egress.record: url must be one non-empty line")
        _check_text(url, "egress url")
        if url not in self._seen:
            self._seen.add(url)
            self._urls.append(url)

    @property
    def urls(self) -> Tuple[str, ...]:
        """The recorded URLs, first-recorded first."""
        return tuple(self._urls)


class Budgets:
    """The limits the executor enforces on this run (None when not given).

    ``timeout_ms`` is the wall-clock limit, ``output_bytes`` the limit on
    stdout and stderr together. They are informational: the executor
    enforces them from outside the process.
    """

    __slots__ = ("_timeout_ms", "_output_bytes")

    def __init__(self, timeout_ms: Optional[int] = None, output_bytes: Optional[int] = None):
        self._timeout_ms = timeout_ms
        self._output_bytes = output_bytes

    @property
    def timeout_ms(self) -> Optional[int]:
        """Wall-clock limit in milliseconds."""
        return self._timeout_ms

    @property
    def output_bytes(self) -> Optional[int]:
        """Limit on stdout+stderr bytes."""
        return self._output_bytes

    def __repr__(self) -> str:
        return "Budgets(timeout_ms=%r, output_bytes=%r)" % (self._timeout_ms, self._output_bytes)


class ProviderRunContext:
    """Everything a provider gets for one run.

    - ``input``: the request's input, plain JSON.
    - ``secrets``: a read-only mapping from secret ref to value; only the
      refs the executor delivered are present. ``secret(ref)`` raises a
      KeyError that names the ref but never a value.
    - ``egress``: an EgressLog; call ``egress.record(url)`` for every
      endpoint reached.
    - ``egress_declared``: the endpoints the manifest declares.
    - ``budgets``: Budgets for this run.
    - ``run_id``, ``entrypoint``, ``idempotency_key``, ``protocol_version``.
    """

    __slots__ = (
        "_input",
        "_secrets",
        "_egress",
        "_egress_declared",
        "_budgets",
        "_run_id",
        "_entrypoint",
        "_idempotency_key",
        "_protocol_version",
    )

    def __init__(
        self,
        input: Any = None,
        secrets: Optional[Mapping[str, str]] = None,
        budgets: Optional[Budgets] = None,
        run_id: str = "local",
        entrypoint: str = "local",
        egress_declared: Iterable[str] = (),
        idempotency_key: Optional[str] = None,
        protocol_version: int = PROTOCOL_VERSION,
    ):
        self._input = input
        self._secrets = types.MappingProxyType(dict(secrets or {}))
        self._egress = EgressLog()
        self._egress_declared = tuple(egress_declared)
        self._budgets = budgets if budgets is not None else Budgets()
        self._run_id = run_id
        self._entrypoint = entrypoint
        self._idempotency_key = idempotency_key
        self._protocol_version = protocol_version

    @property
    def input(self) -> Any:
        """The request's input."""
        return self._input

    @property
    def secrets(self) -> Mapping[str, str]:
        """Read-only mapping from secret ref to value."""
        return self._secrets

    def secret(self, ref: str) -> str:
        """The value of secret ``ref``; KeyError (naming the ref) when it was not delivered."""
        try:
            return self._secrets[ref]
        except KeyError:
            raise KeyError("secret %r was not delivered to this run (declare it in provider.toml and pass it to the executor)" % ref) from None

    @property
    def egress(self) -> EgressLog:
        """Where the run records the endpoints it reached."""
        return self._egress

    @property
    def egress_declared(self) -> Tuple[str, ...]:
        """The endpoints the manifest declares."""
        return self._egress_declared

    @property
    def budgets(self) -> Budgets:
        """The limits the executor enforces on this run."""
        return self._budgets

    @property
    def run_id(self) -> str:
        """The executor's id for this run, echoed in the result."""
        return self._run_id

    @property
    def entrypoint(self) -> str:
        """The entrypoint name being run."""
        return self._entrypoint

    @property
    def idempotency_key(self) -> Optional[str]:
        """The caller's idempotency key, or None."""
        return self._idempotency_key

    @property
    def protocol_version(self) -> int:
        """The protocol version of the request."""
        return self._protocol_version

    def __repr__(self) -> str:
        # Never show secret values.
        return "ProviderRunContext(run_id=%r, entrypoint=%r, secrets=%r)" % (
            self._run_id,
            self._entrypoint,
            sorted(self._secrets),
        )
