package invoke

import "testing"

// TestDuplicateKey: a key twice in one object, at any depth and compared
// decoded, is found; the same key in sibling objects, or in an object and
// its parent, is not. The harness refused such an input before it read
// its run_id, and the executor recorded its answer as protocol_error,
// blaming the harness for the caller's input (a review).
func TestDuplicateKey(t *testing.T) {
	for _, c := range []struct {
		in, key string
	}{
		{`{"a":1,"a":2}`, "a"},
		{`{"a":[1,{"x":1,"x":2}]}`, "x"},
		{`{"\u0061":1,"a":2}`, "a"},
		{`{"a":{"b":1},"c":{"d":{},"d":[]}}`, "d"},
		{`{"a":{"b":1},"b":2}`, ""},
		{`[{"a":1},{"a":2}]`, ""},
		{`{"a":{"a":{"a":1}}}`, ""},
		{`{"a":"{\"a\":1,\"a\":2}"}`, ""},
		{`"{"`, ""},
		{`{}`, ""},
		{`[]`, ""},
	} {
		t.Run(c.in, func(t *testing.T) {
			key, ok := duplicateKey([]byte(c.in))
			if ok != (c.key != "") || key != c.key {
				t.Errorf("duplicateKey(%s) = %q, %v; want %q", c.in, key, ok, c.key)
			}
		})
	}
}
