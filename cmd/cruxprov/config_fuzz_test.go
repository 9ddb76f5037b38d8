package main

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// FuzzParseConfig: whatever config.yaml holds (the operator's file),
// parseConfig makes a config of the known format or a one-line usage error
// naming the file, without panicking; and a config it accepts encodes to a
// document it reads back as the same config.
func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{
		"format: cruxprov.config/v1\nindex: https://mirror.example/simple/\nplatforms: [host]\npython: /usr/bin/python3.11\n",
		"format: cruxprov.config/v1\n",
		"format: cruxprov.config/v1\nindx: x\n",
		"format: cruxprov.config/v1\nplatforms: host\n",
		"format: cruxprov.config/v1\nindx: x\npythn: y\n",
		"format: cruxprov.config/v2\n",
		"a: &a [*a]\n",
		"--- \n...\n",
		"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		const p = "/store/config.yaml"
		c, err := parseConfig(p, b)
		if err != nil {
			var ue *usageError
			if !errors.As(err, &ue) {
				t.Fatalf("not a usage error: %v", err)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, p+": ") || strings.ContainsAny(msg, "\r\n") {
				t.Fatalf("not one line naming the file: %q", msg)
			}
			return
		}
		if c.Format != configFormat {
			t.Fatalf("accepted format %q", c.Format)
		}
		out, err := yaml.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		again, err := parseConfig(p, out)
		if err != nil {
			t.Fatalf("%q re-encoded as %q: %v", b, out, err)
		}
		if !reflect.DeepEqual(normConfig(c), normConfig(again)) {
			t.Fatalf("round trip %+v -> %+v", c, again)
		}
	})
}

func normConfig(c *config) config {
	n := *c
	if len(n.Platforms) == 0 {
		n.Platforms = nil
	}
	return n
}

// TestParseConfigErrors: an unknown key is one line naming the keys there
// are (yaml's "unmarshal errors:" heading put it on a second line), and a
// second document is refused, not ignored.
func TestParseConfigErrors(t *testing.T) {
	_, err := parseConfig("c.yaml", []byte("format: cruxprov.config/v1\nindx: x\npythn: y\n"))
	if err == nil || err.Error() != "c.yaml: line 2: field indx is not a key of config.yaml (its keys: format, index, platforms, python; docs/operator.md); line 3: field pythn is not a key of config.yaml (its keys: format, index, platforms, python; docs/operator.md)" {
		t.Errorf("unknown keys: %v", err)
	}
	for _, s := range []string{"format: cruxprov.config/v1\n---\nindex: https://x.example/simple/\n", "format: cruxprov.config/v1\n---\n: :\n"} {
		if _, err := parseConfig("c.yaml", []byte(s)); err == nil || !strings.Contains(err.Error(), "more than one YAML document") {
			t.Errorf("%q: %v", s, err)
		}
	}
	if c, err := parseConfig("c.yaml", []byte("format: cruxprov.config/v1\nindex: https://x.example/simple/\n")); err != nil || c.Index != "https://x.example/simple/" {
		t.Errorf("%+v %v", c, err)
	}
}
