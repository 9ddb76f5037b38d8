package main

import (
	"strings"
	"testing"
)

// TestWheelFileAgain: the wheel_file remedy replaces the argument that
// names the root wheel as NAME==VERSION, not a flag's value that has
// "==" in it (a --home under a directory so named), and puts it after
// --wheel where the command takes it so, leaving --sha256 out there.
func TestWheelFileAgain(t *testing.T) {
	for _, tc := range []struct{ args, want string }{
		{"cruxprov --home /a==b install acme-echo==1.0.0 --sha256 ab --offline --json",
			"cruxprov --home /a==b install WHEEL --sha256 ab --offline"},
		{"cruxprov env create --home=/a==b acme-echo==1.0.0 --sha256=ab --offline --platform host",
			"cruxprov env create --home=/a==b --wheel WHEEL --offline --platform host"},
		{"cruxprov env create --sha256 ab --offline -- acme-echo==1.0.0",
			"cruxprov env create --offline --wheel WHEEL --"},
		{"cruxprov install --offline -- acme-echo==1.0.0",
			"cruxprov install --offline -- WHEEL"},
		{"cruxprov image build acme-echo==1.0.0 --sha256 ab --offline --platform p --base oci:b@sha256:00",
			"cruxprov image build --wheel WHEEL --offline --platform p --base oci:b@sha256:00"},
		{"cruxprov install w.whl --offline", ""},
	} {
		if got := wheelFileAgain(splitArgs(tc.args)); got != tc.want {
			t.Errorf("%s\n got %q\nwant %q", tc.args, got, tc.want)
		}
	}
}

func splitArgs(s string) []string { return strings.Fields(s) }
