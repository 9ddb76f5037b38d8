package lockfile

import (
	"encoding/json"
	"testing"
)

// TestWarningJSON: a warning is the one line "KEY: DETAIL" in JSON, as
// lock resolve --json and every document's warnings list give it (not
// {"Key":…,"Detail":…}), and reads back to the same warning.
func TestWarningJSON(t *testing.T) {
	w := []Warning{{Key: "packages.foo", Detail: "unknown key ignored"}}
	b, err := json.Marshal(w)
	if err != nil || string(b) != `["packages.foo: unknown key ignored"]` {
		t.Fatalf("%s %v", b, err)
	}
	var back []Warning
	if err := json.Unmarshal(b, &back); err != nil || len(back) != 1 || back[0] != w[0] {
		t.Fatalf("%+v %v", back, err)
	}
	if err := json.Unmarshal([]byte(`["no separator"]`), &back); err == nil {
		t.Error("a warning without KEY: was read")
	}
}
