// Package schematest validates the documents cruxprov writes for other
// tools against those documents' official definitions, with real
// validators, for the tests of the packages that write them: a CycloneDX
// SBOM against the CycloneDX JSON schema (bom-1.5.schema.json and the
// spdx and jsf schemas it refers to, resolved locally) with Python's
// jsonschema, and an in-toto Statement (and a SLSA provenance v1
// predicate in it) with the in-toto project's Go bindings and validators.
//
// The schemas and the in-toto bindings come from the Go module proxy,
// pinned by the go.sum of the validator's own module (intoto/, a module
// of its own so that cruxprov's go.mod does not carry them):
// github.com/CycloneDX/cyclonedx-go v0.12.0 carries the CycloneDX schemas
// in schema/, github.com/in-toto/attestation v1.2.0 the bindings. When
// the validator cannot be had, a test skips saying what to install:
// `apt-get install python3-jsonschema` (Debian's, 4.10) and `make schemas`
// (`cd internal/schematest/intoto && go mod download`). CI (.ci/run)
// installs both, so the tests run there.
package schematest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// CycloneDXModule is the module whose schema/ directory holds the
// CycloneDX JSON schemas the SBOMs are validated against.
const CycloneDXModule = "github.com/CycloneDX/cyclonedx-go"

type tools struct {
	python    string // a python3 that imports jsonschema
	schemas   string // the directory of bom-1.5.schema.json
	intoto    string // the built validator
	dir       string
	skip, err string
}

var (
	once sync.Once
	got  tools
)

func here() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(file)
}

func setup() tools {
	var t tools
	for _, py := range []string{"/usr/bin/python3", "python3"} {
		if exec.Command(py, "-c", "import jsonschema").Run() == nil {
			t.python = py
			break
		}
	}
	if t.python == "" {
		t.skip = "no python3 with the jsonschema module: apt-get install python3-jsonschema (CI's .ci/run installs it)"
		return t
	}
	mod := filepath.Join(here(), "intoto")
	run := func(args ...string) ([]byte, error) {
		c := exec.Command("go", args...) // go test puts its own go first on PATH
		c.Dir = mod
		c.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly -buildvcs=false")
		var stderr bytes.Buffer
		c.Stderr = &stderr
		out, err := c.Output()
		if err != nil {
			return nil, &runErr{strings.Join(args, " "), err, stderr.String()}
		}
		return out, nil
	}
	if _, err := run("mod", "download"); err != nil {
		t.skip = "the validator's modules (the CycloneDX schemas, the in-toto bindings) are not in the module cache and cannot be fetched: " +
			"make schemas (cd internal/schematest/intoto && go mod download) with the Go module proxy reachable (CI's .ci/run does it): " + err.Error()
		return t
	}
	out, err := run("list", "-m", "-f", "{{.Dir}}", CycloneDXModule)
	if err != nil {
		t.err = err.Error()
		return t
	}
	t.schemas = filepath.Join(strings.TrimSpace(string(out)), "schema")
	if _, err := os.Stat(filepath.Join(t.schemas, "bom-1.5.schema.json")); err != nil {
		t.err = "the CycloneDX 1.5 schema is not where the module keeps it: " + err.Error()
		return t
	}
	if t.dir, err = os.MkdirTemp("", "cruxprov-schematest-"); err != nil {
		t.err = err.Error()
		return t
	}
	t.intoto = filepath.Join(t.dir, "intoto")
	if _, err := run("build", "-o", t.intoto, "."); err != nil {
		t.err = err.Error()
	}
	return t
}

type runErr struct {
	what   string
	err    error
	stderr string
}

func (e *runErr) Error() string {
	return "go " + e.what + ": " + e.err.Error() + ": " + strings.TrimSpace(e.stderr)
}

func need(t testing.TB) tools {
	t.Helper()
	once.Do(func() { got = setup() })
	if got.skip != "" {
		t.Skip(got.skip)
	}
	if got.err != "" {
		t.Fatal("schematest: " + got.err)
	}
	return got
}

// Cleanup removes the built validator; a TestMain calls it after the
// tests ran.
func Cleanup() {
	if got.dir != "" {
		os.RemoveAll(got.dir)
	}
}

func files(t testing.TB, docs [][]byte) []string {
	t.Helper()
	dir := t.TempDir()
	var out []string
	for i, d := range docs {
		f := filepath.Join(dir, "doc"+strconv.Itoa(i)+".json")
		if err := os.WriteFile(f, d, 0o644); err != nil {
			t.Fatal(err)
		}
		out = append(out, f)
	}
	return out
}

// CycloneDX validates each of docs, a CycloneDX 1.5 JSON document, against
// the official schema, failing t with every error the validator names.
func CycloneDX(t testing.TB, docs ...[]byte) {
	t.Helper()
	if out, err := cycloneDX(t, docs); err != nil {
		t.Errorf("CycloneDX 1.5 schema (%s, %s): %v\n%s", got.python, got.schemas, err, out)
	}
}

func cycloneDX(t testing.TB, docs [][]byte) ([]byte, error) {
	t.Helper()
	tl := need(t)
	args := append([]string{filepath.Join(here(), "cyclonedx.py"), tl.schemas}, files(t, docs)...)
	return exec.Command(tl.python, args...).CombinedOutput()
}

// InToto validates each of statements, an in-toto Statement v1 as JSON
// (with a SLSA provenance v1 predicate checked as that), failing t with
// every problem the validator names.
func InToto(t testing.TB, statements ...[]byte) {
	t.Helper()
	if out, err := inToto(t, statements); err != nil {
		t.Errorf("in-toto Statement v1 / SLSA provenance v1: %v\n%s", err, out)
	}
}

func inToto(t testing.TB, statements [][]byte) ([]byte, error) {
	t.Helper()
	tl := need(t)
	return exec.Command(tl.intoto, files(t, statements)...).CombinedOutput()
}
