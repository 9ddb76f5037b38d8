package main

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/internal/fixtures"
	"github.com/cruxible/cruxprov/internal/wheeltest"
)

// inspectPins are the known answers for the fixture wheels: the wheel's
// sha256 and each entrypoint's implementation digest (DESIGN §5). They
// change only when python/cruxible_provider_runtime or
// internal/fixtures change what the wheels hold (the runtime wheel is in
// every lock): then check why, and paste the "got" map the failure prints.
var inspectPins = map[string]string{
	"acme-echo":          "sha256:bbb6447eaf2867073b2cccd97a84f418b88cfedba6fd1548ddb9382f671a0190",
	"acme-echo/echo":     "sha256:6f216d34b265a24a54bf7ece20400774779fdb5dd2bd027e650ad5f2776703cf",
	"acme-echo/fail":     "sha256:180ee00f8d33f1a5e074a2e10a07b7558aff7114bb68d1cc4e7edc49543f7940",
	"acme-echo/flood":    "sha256:404a4f88024b7568a07e6bd6274419fb173c37daede0b1a07c18c507151352dd",
	"acme-echo/sleep":    "sha256:4372abe640c54ffa2d92fa443eed85cdb1f0525f2da8e785251980d3c96d7dbd",
	"acme-native":        "sha256:b7955affe01580e86ff583c441eb11867333354b092a9b2111009db7bc86af34",
	"acme-native/which":  "sha256:10b5d2ba835efb7436e09861fedac34a0c70b1e01418d7bf74055939773597e1",
	"acme-scripts":       "sha256:4ee56fcc91c6d1a995417c6a85ecea98f790fd2d6ce62492a950d6e087ed682c",
	"acme-scripts/hello": "sha256:0a3c728b5d04a6e5001b9d8bb4b1fdf5078f87225689eaf11917201dd844a465",
}

type inspectDoc struct {
	Schema string `json:"schema"`
	Wheel  struct {
		Filename, Name, Version, SHA256 string
		Size                            int64
		Tags                            []string
	} `json:"wheel"`
	Manifest struct {
		Name    string   `json:"name"`
		Secrets []string `json:"secrets"`
		Digest  string   `json:"digest"`
	} `json:"manifest"`
	Entrypoints []struct {
		Name                 string `json:"name"`
		Object               string `json:"object"`
		ImplementationDigest string `json:"implementation_digest"`
		Interface            struct{ ID, Digest string }
	} `json:"entrypoints"`
	Lock struct {
		Digest    string   `json:"digest"`
		Wheels    int      `json:"wheels"`
		Platforms []string `json:"platforms"`
		Packages  []struct {
			Name   string `json:"name"`
			Wheels int    `json:"wheels"`
		} `json:"packages"`
	} `json:"lock"`
	Warnings []any `json:"warnings"`
}

func inspectJSON(t *testing.T, path string) inspectDoc {
	t.Helper()
	// --json after the positional: §13 says it must be honoured.
	r := cruxprov(t, "inspect", path, "--json")
	if r.code != 0 {
		t.Fatalf("inspect %s: %+v", path, r)
	}
	var d inspectDoc
	if err := json.Unmarshal([]byte(r.stdout), &d); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	return d
}

// TestInspectKnownAnswers: inspect --json on each fixture provider gives
// the pinned sha256 and implementation digests, which are also what the
// fixtures compute independently.
func TestInspectKnownAnswers(t *testing.T) {
	s := fixtures.ForTest(t, fixtures.Options{})
	got := map[string]string{}
	for _, p := range s.Providers() {
		d := inspectJSON(t, p.Path)
		if d.Schema != "cruxprov.inspect/v1" || d.Wheel.Name != p.Name || d.Wheel.Version != p.Version ||
			d.Wheel.SHA256 != p.SHA256.String() || d.Wheel.Size != p.Size || strings.Join(d.Wheel.Tags, ",") != "py3-none-any" {
			t.Errorf("%s: wheel %+v", p.Name, d.Wheel)
		}
		if d.Manifest.Name != p.Name || len(d.Warnings) != 0 {
			t.Errorf("%s: manifest %+v warnings %v", p.Name, d.Manifest, d.Warnings)
		}
		got[p.Name] = d.Wheel.SHA256
		if len(d.Entrypoints) != len(p.Entrypoints) {
			t.Fatalf("%s: %d entrypoints", p.Name, len(d.Entrypoints))
		}
		for i, e := range d.Entrypoints {
			want := p.Entrypoints[i]
			if e.Name != want.Name || e.Object != want.Object || e.ImplementationDigest != want.ImplementationDigest.String() ||
				e.Interface.ID != want.Interface || e.Interface.Digest != want.InterfaceDigest.String() {
				t.Errorf("%s: entrypoint %+v, fixtures say %+v", p.Name, e, want)
			}
			got[p.Name+"/"+e.Name] = e.ImplementationDigest
		}
		if d.Lock.Wheels != len(p.Dependencies) {
			t.Errorf("%s: lock has %d wheels, want %d", p.Name, d.Lock.Wheels, len(p.Dependencies))
		}
	}
	nat := inspectJSON(t, s.Native.Path)
	wantPlats := append([]string{"any", "manylinux2014_aarch64", "manylinux2014_x86_64"}, fixtures.NativePlatforms...)
	sort.Strings(wantPlats)
	if strings.Join(nat.Lock.Platforms, ",") != strings.Join(wantPlats, ",") || len(nat.Lock.Packages) != 2 ||
		nat.Lock.Packages[0].Name != "acme-native-lib" || nat.Lock.Packages[0].Wheels != 5 {
		t.Errorf("acme-native lock summary: %+v", nat.Lock)
	}
	var diff []string
	for k, v := range got {
		if inspectPins[k] != v {
			diff = append(diff, k)
		}
	}
	if len(diff) > 0 || len(got) != len(inspectPins) {
		keys := make([]string, 0, len(got))
		for k := range got {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var b strings.Builder
		for _, k := range keys {
			fmt.Fprintf(&b, "\t%q: %q,\n", k, got[k])
		}
		t.Errorf("known answers differ for %v; got:\n%s", diff, b.String())
	}
}

func TestInspectHuman(t *testing.T) {
	s := fixtures.ForTest(t, fixtures.Options{})
	r := cruxprov(t, "inspect", s.Echo.Path)
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("%+v", r)
	}
	for _, want := range []string{"acme-echo 1.0.0", s.Echo.SHA256.String(), "acme/api-token", "ENTRYPOINT", "cruxible-provider-runtime",
		s.Echo.Entrypoints[0].ImplementationDigest.String(), "acme_echo.diagnostics:flood"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("human output lacks %q:\n%s", want, r.stdout)
		}
	}
}

// refusedCode runs args with --json and returns the refusal code (exit 78).
func refusedCode(t *testing.T, args ...string) string {
	t.Helper()
	r := cruxprov(t, append(args, "--json")...)
	var v struct {
		Refused struct{ Code, Detail string } `json:"refused"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || r.code != exitRefused {
		t.Fatalf("%v: want a refusal: %+v (%v)", args, r, err)
	}
	return v.Refused.Code
}

func TestInspectRefusals(t *testing.T) {
	s := fixtures.ForTest(t, fixtures.Options{})
	dir := t.TempDir()
	if c := refusedCode(t, "inspect", s.Runtime.Path); c != "manifest_missing" {
		t.Errorf("runtime wheel: %s", c)
	}
	noLock := wheeltest.Write(t, dir, "acme_echo-1.0.0-py3-none-any.whl", map[string]string{
		"acme_echo/__init__.py": "", "DI/cruxible/provider.toml": string(s.Echo.Manifest)})
	if c := refusedCode(t, "inspect", noLock); c != "lock_missing" {
		t.Errorf("no lock: %s", c)
	}
	badManifest := wheeltest.Write(t, t.TempDir(), "acme_echo-1.0.0-py3-none-any.whl", map[string]string{
		"DI/cruxible/provider.toml": strings.Replace(string(s.Echo.Manifest), "schema = 1", "schema = 2", 1),
		"DI/cruxible/pylock.toml":   string(s.Echo.Lock)})
	if c := refusedCode(t, "inspect", badManifest); c != "manifest_invalid" {
		t.Errorf("bad manifest: %s", c)
	}
	badLock := wheeltest.Write(t, t.TempDir(), "acme_echo-1.0.0-py3-none-any.whl", map[string]string{
		"DI/cruxible/provider.toml": string(s.Echo.Manifest),
		"DI/cruxible/pylock.toml":   "lock-version = \"2.0\"\n"})
	if c := refusedCode(t, "inspect", badLock); c != "lock_version_unsupported" {
		t.Errorf("bad lock: %s", c)
	}
	if c := refusedCode(t, "inspect", tamper(t, s.Echo.Path, "acme_echo/__init__.py")); c != "record_mismatch" {
		t.Errorf("tampered: %s", c)
	}
	// A missing file is a usage error, never a refusal blaming a wheel.
	if r := cruxprov(t, "inspect", filepath.Join(dir, "acme_echo-9.0.0-py3-none-any.whl")); r.code != exitUsage || !strings.Contains(r.stderr, "no such file") {
		t.Errorf("missing file: %+v", r)
	}
	for _, args := range [][]string{{"inspect"}, {"inspect", "a.whl", "b.whl"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			if r := cruxprov(t, args...); r.code != exitUsage {
				t.Errorf("%v: %+v", args, r)
			}
		})
	}
}

// tamper copies the wheel at path and flips one byte of member (stored
// uncompressed in fixture wheels), keeping the zip valid.
func tamper(t *testing.T, path, member string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range zr.File {
		if f.Name != member {
			continue
		}
		off, err := f.DataOffset()
		if err != nil || f.UncompressedSize64 == 0 || f.Method != zip.Store {
			t.Fatalf("cannot tamper with %s: %v", member, err)
		}
		b[off] ^= 0x20
		out := filepath.Join(t.TempDir(), filepath.Base(path))
		if err := os.WriteFile(out, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return out
	}
	t.Fatalf("no member %s", member)
	return ""
}

// TestLockWarningsOneShape: inspect --json and lock resolve --json give a
// lock's warnings in one shape, the one line "KEY: DETAIL" every
// document's warnings list holds; inspect gave objects of Go field names,
// [{"Detail":…,"Key":…}].
func TestLockWarningsOneShape(t *testing.T) {
	s := fixtures.ForTest(t, fixtures.Options{})
	in := t.TempDir()
	mf, lf := embedInputs(t, in, "acme-echo", s)
	lock, err := os.ReadFile(lf)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lf, append([]byte("foo = 1\n"), lock...), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), s.Echo.Filename)
	if r := cruxprov(t, "package", "embed", s.Echo.Path, "--manifest", mf, "--lock", lf, "-o", out); r.code != 0 {
		t.Fatalf("%+v", r)
	}
	var inspect, resolve struct{ Warnings []string }
	r := cruxprov(t, "inspect", out, "--json")
	if err := json.Unmarshal([]byte(r.stdout), &inspect); err != nil || r.code != 0 {
		t.Fatalf("inspect --json: %v: %+v", err, r)
	}
	r = cruxprov(t, "lock", "resolve", "--lock", lf, "--platform", "cp311-manylinux_2_36_x86_64", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &resolve); err != nil {
		t.Fatalf("lock resolve --json: %v: %+v", err, r)
	}
	if !slices.Contains(inspect.Warnings, "foo: unknown key ignored") || !slices.Contains(resolve.Warnings, "foo: unknown key ignored") {
		t.Errorf("inspect %q, lock resolve %q: want both to say %q", inspect.Warnings, resolve.Warnings, "foo: unknown key ignored")
	}
}
