"""provider_api in process: what a provider author's own tests can do."""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from cruxible_provider_runtime import (  # noqa: E402
    PROTOCOL_VERSION,
    Budgets,
    ProviderResult,
    ProviderRunContext,
    __version__,
)
from cruxible_provider_runtime.provider_api import check_json_value  # noqa: E402


class ProviderResultTest(unittest.TestCase):
    def test_ok_and_error(self):
        r = ProviderResult.ok({"a": [1, 2.5, None, True, "x"]})
        r.check()
        self.assertEqual((r.status, r.result, r.code, r.message), ("ok", {"a": [1, 2.5, None, True, "x"]}, None, None))
        e = ProviderResult.error("bad_request", "needs a name")
        e.check()
        self.assertEqual((e.status, e.code, e.message), ("error", "bad_request", "needs a name"))
        self.assertEqual(ProviderResult.ok(1), ProviderResult.ok(1))
        self.assertNotEqual(ProviderResult.ok(1), ProviderResult.ok(2))

    def test_check_refuses(self):
        bad = [
            ProviderResult.ok(float("inf")),
            ProviderResult.ok({1: 2}),
            ProviderResult.ok({"s": {1, 2}}),
            ProviderResult.ok("\ud800"),
            ProviderResult.ok(object()),
            ProviderResult.error("import_failed", "a provider may not claim this"),
            ProviderResult.error("teapot", "x"),
            ProviderResult.error("provider_error", b"bytes"),
            ProviderResult("maybe"),
        ]
        for r in bad:
            with self.subTest(r=r):
                with self.assertRaises(ValueError):
                    r.check()

    def test_values_json_does_not_have(self):
        # A tuple passed as a JSON list: ProviderResult.ok((1, 2)) went out
        # as [1, 2], a result its author did not write. Each value that is
        # not exactly a JSON type is refused, saying where and what to pass.
        import collections
        import enum

        class Colour(enum.IntEnum):
            RED = 1

        Point = collections.namedtuple("Point", "x y")
        cases = [
            ((1, 2), "result is a tuple, which is not JSON: pass a list"),
            ({"a": [(1,)]}, "result['a'][0] is a tuple, which is not JSON: pass a list"),
            (Point(1, 2), "result is a Point, which is not JSON: pass a list"),
            ({1, 2}, "result is a set, which is not JSON: pass a list (sorted"),
            (frozenset(), "result is a frozenset, which is not JSON: pass a list (sorted"),
            (b"x", "result is a bytes, which is not JSON: pass a str"),
            ([bytearray(b"x")], "result[0] is a bytearray, which is not JSON: pass a str"),
            (float("nan"), "result is nan, which JSON cannot carry: pass a finite number, or None"),
            ({"x": float("-inf")}, "result['x'] is -inf, which JSON cannot carry"),
            ({1: "one"}, "result has a key of type int; JSON keys are strings: pass str keys"),
            ({("a", "b"): 1}, "result has a key of type tuple; JSON keys are strings"),
            ({"c": Colour.RED}, "result['c'] is a Colour, which is not JSON: pass a plain int (int(value))"),
            (collections.OrderedDict(a=1), "result is a OrderedDict, which is not JSON: pass a plain dict (dict(value))"),
            (object(), "result is a object, which is not JSON"),
        ]
        for value, want in cases:
            with self.subTest(value=value):
                with self.assertRaises(ValueError) as cm:
                    ProviderResult.ok(value).check()
                self.assertIn(want, str(cm.exception))
        # What json.loads gives passes, a list of lists included.
        ProviderResult.ok({"a": [[1, 2], {"b": None}], "c": 1.5, "d": True}).check()

    def test_integers_json_cannot_write(self):
        # check() passed an integer of 5000 digits that the harness's
        # json.dumps then refused (result_invalid): a provider's own test of
        # check() did not see what the harness would refuse.
        if not hasattr(sys, "get_int_max_str_digits") or sys.get_int_max_str_digits() == 0:
            self.skipTest("this interpreter writes integers of any length")
        limit = sys.get_int_max_str_digits()
        check_json_value([-(10 ** limit - 1)])
        with self.assertRaises(ValueError) as cm:
            ProviderResult.ok({"n": [10 ** limit]}).check()
        self.assertIn("result['n'][0]", str(cm.exception))

    def test_deep_and_cyclic_values(self):
        deep = []
        cur = deep
        for _ in range(500):
            nxt = []
            cur.append(nxt)
            cur = nxt
        with self.assertRaises(ValueError):
            check_json_value(deep)
        cyc = []
        cyc.append(cyc)
        with self.assertRaises(ValueError):
            check_json_value(cyc)


class ContextTest(unittest.TestCase):
    def test_secrets_read_only_and_never_shown(self):
        ctx = ProviderRunContext(input=1, secrets={"acme/api-token": "hunter2"})
        self.assertEqual(ctx.secret("acme/api-token"), "hunter2")
        with self.assertRaises(TypeError):
            ctx.secrets["x"] = "y"
        with self.assertRaises(KeyError) as cm:
            ctx.secret("other")
        self.assertIn("other", str(cm.exception))
        self.assertNotIn("hunter2", repr(ctx))
        self.assertNotIn("hunter2", str(cm.exception))

    def test_egress_log(self):
        ctx = ProviderRunContext()
        ctx.egress.record("https://a.example/")
        ctx.egress.record("https://b.example/")
        ctx.egress.record("https://a.example/")
        self.assertEqual(ctx.egress.urls, ("https://a.example/", "https://b.example/"))
        for bad in ("", "a\nb", 5, None):
            with self.assertRaises((TypeError, ValueError)):
                ctx.egress.record(bad)

    def test_defaults(self):
        ctx = ProviderRunContext()
        self.assertEqual(ctx.protocol_version, PROTOCOL_VERSION)
        self.assertIsNone(ctx.budgets.timeout_ms)
        self.assertEqual(repr(Budgets(1, 2)), "Budgets(timeout_ms=1, output_bytes=2)")
        self.assertRegex(__version__, r"^\d+\.\d+\.\d+$")


if __name__ == "__main__":
    unittest.main()
