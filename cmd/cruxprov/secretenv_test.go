package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/refusal"
)

// TestRunSecretNotForwarded: --allow-env naming the variable a --secret
// REF=env:VAR reads would put the secret in the provider's environment
// besides fd 3, and for a container run in podman's record of the
// container (podman inspect, and a container a killed executor left keeps
// it): a usage error, before anything is read or run, that does not print
// the value. Either backend, either order of the flags.
func TestRunSecretNotForwarded(t *testing.T) {
	input := filepath.Join(t.TempDir(), "in.json")
	os.WriteFile(input, []byte(`{}`), 0o644)
	for _, backend := range []string{"local", "container"} {
		cmd := exec.Command(bin, "--home", t.TempDir(), "run", "acme-echo", "echo", "--input", input, "--backend", backend,
			"--allow-env", "ACME_TOKEN", "--secret", "acme/api-token=env:ACME_TOKEN", "--ledger", filepath.Join(t.TempDir(), "r.jsonl"))
		cmd.Env = append(os.Environ(), "ACME_TOKEN=s3cret-value")
		r := runCmd(t, cmd)
		if r.code != exitUsage || !strings.HasPrefix(r.stderr, "usage: --allow-env ACME_TOKEN: it holds the secret acme/api-token") ||
			strings.Count(r.stderr, "\n") != 1 || strings.Contains(r.stdout+r.stderr, "s3cret") {
			t.Errorf("%s: %+v", backend, r)
		}
	}
}

// TestSecretSpecUsage: --secret acme/api-token, with no =@FILE or
// =env:VAR, was a usage error quoting "acme/api-token=…", as if a source
// had been given and hidden. It now says no source was named; what
// follows an = that is not a source stays hidden (it may be the secret).
func TestSecretSpecUsage(t *testing.T) {
	for _, c := range []struct{ spec, want, not string }{
		{"acme/api-token", `--secret "acme/api-token" names no source: want acme/api-token=@FILE or acme/api-token=env:VAR`, "=…"},
		{"acme/api-token=s3cr3t", `--secret "acme/api-token=…": want REF=@FILE or REF=env:VAR`, "s3cr3t"},
		{"=@token", `--secret "=…": want REF=@FILE or REF=env:VAR`, "token"},
		{"", "--secret is empty", "=…"},
	} {
		_, err := secretResolver([]string{c.spec})
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), c.not) || !errors.As(err, new(*usageError)) {
			t.Errorf("--secret %q: %v", c.spec, err)
		}
	}
}

// TestSecretNotUTF8NamesItsSource: a --secret REF=@FILE whose file is not
// UTF-8 was refused "secret \"REF\" is not valid UTF-8 text", naming
// neither the file nor the variable it came from. It names it.
func TestSecretNotUTF8NamesItsSource(t *testing.T) {
	f := filepath.Join(t.TempDir(), "bad.txt")
	if err := os.WriteFile(f, []byte{0xff, 0xfe}, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CRUXPROV_TEST_BAD_SECRET", "\xff")
	for _, src := range []string{"@" + f, "env:CRUXPROV_TEST_BAD_SECRET"} {
		resolve, err := secretResolver([]string{"acme/api-token=" + src})
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(src, "@")
		_, err = resolve(t.Context(), "acme/api-token")
		if refusal.CodeOf(err) != refusal.SecretUnresolved || !strings.Contains(err.Error(), "secret acme/api-token: "+name+" is not valid UTF-8 text") {
			t.Errorf("%s: %v", src, err)
		}
	}
}

// TestSecretUnresolvedSaysWhatToDo: a --secret REF=@FILE that cannot be
// read (missing, a directory, unreadable) and a REF=env:VAR not set were
// refused secret_unresolved with the cause alone ("secret REF: stat F: no
// such file or directory", "secret REF: env:VAR is not set"), nothing of
// what to do next (found walking executor.md: a secret missing).
func TestSecretUnresolvedSaysWhatToDo(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("CRUXPROV_TEST_UNSET_SECRET", "")
	os.Unsetenv("CRUXPROV_TEST_UNSET_SECRET")
	for _, c := range []struct{ src, want string }{
		{"@" + filepath.Join(dir, "missing"), "secret acme/api-token: stat " + filepath.Join(dir, "missing") + ": no such file or directory; give --secret acme/api-token=@FILE a regular file this user can read"},
		{"@" + dir, "secret acme/api-token: " + dir + " is not a regular file; give --secret acme/api-token=@FILE a regular file"},
		{"env:CRUXPROV_TEST_UNSET_SECRET", "secret acme/api-token: env:CRUXPROV_TEST_UNSET_SECRET is not set; set CRUXPROV_TEST_UNSET_SECRET in this run's environment"},
	} {
		resolve, err := secretResolver([]string{"acme/api-token=" + c.src})
		if err != nil {
			t.Fatal(err)
		}
		_, err = resolve(t.Context(), "acme/api-token")
		var r *refusal.Error
		if !errors.As(err, &r) || r.Code != refusal.SecretUnresolved || !strings.HasPrefix(r.Message(), c.want) || strings.Count(r.Message(), "no such file") > 1 {
			t.Errorf("%s: %v", c.src, err)
		}
	}
}

// TestRunInputNotJSONSaysWhy: an --input that is empty (a job's stdin that
// gave nothing) or not JSON was "usage: --input: not one JSON document",
// naming neither the input nor what was wrong. Exit 64, before any pin is
// read.
func TestRunInputNotJSONSaysWhy(t *testing.T) {
	dir := t.TempDir()
	empty, bad := filepath.Join(dir, "empty.json"), filepath.Join(dir, "bad.json")
	os.WriteFile(empty, []byte(" \n"), 0o600)
	os.WriteFile(bad, []byte(`{"a": 1} {"b": 2}`), 0o600)
	for _, c := range []struct{ in, stdin, want string }{
		{empty, "", "usage: --input " + empty + " is empty: give one JSON document, {} for a request without input"},
		{"-", "", "usage: --input - is empty: give one JSON document"},
		{bad, "", "usage: --input " + bad + ": not one JSON document (invalid character '{' after top-level value)"},
		{"-", `{"a": `, "usage: --input -: not one JSON document (unexpected end of JSON input)"},
		// Which input, as for the others: it said "--input: not valid UTF-8".
		{"-", "\"\xff\"", "usage: --input -: not valid UTF-8"},
	} {
		cmd := exec.Command(bin, "run", "acme-echo", "echo", "--input", c.in)
		cmd.Env = append(os.Environ(), "CRUXPROV_HOME="+t.TempDir())
		cmd.Stdin = strings.NewReader(c.stdin)
		r := runCmd(t, cmd)
		if r.code != exitUsage || !strings.HasPrefix(r.stderr, c.want) {
			t.Errorf("--input %s (stdin %q): %+v", c.in, c.stdin, r)
		}
	}
}

// TestSecretTooLargeOrNotTextSaysWhatToDo: a --secret REF=@FILE over 64
// KiB was refused "secret REF: F is larger than 64 KiB", and one that is
// not UTF-8 "secret REF: F is not valid UTF-8 text (the bundle on fd 3 is
// JSON text)": why, but not what to do next (found walking executor.md).
// Each says it once, the cause not repeated.
func TestSecretTooLargeOrNotTextSaysWhatToDo(t *testing.T) {
	dir := t.TempDir()
	big, bad := filepath.Join(dir, "big.txt"), filepath.Join(dir, "bad.txt")
	if err := os.WriteFile(big, []byte(strings.Repeat("a", 64<<10+1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte{0xff, 0xfe}, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		src  string
		code refusal.Code
		want string
	}{
		{"@" + big, refusal.SecretBundleTooLarge, "secret acme/api-token: " + big + " is larger than 64 KiB (the most the secret bundle on fd 3 holds); give the provider a smaller value: a credential, or a path or URL naming the material, not the material itself"},
		{"@" + bad, refusal.SecretUnresolved, "secret acme/api-token: " + bad + " is not valid UTF-8 text (the bundle on fd 3 is JSON text); give the value as text, binary data encoded (as base64 say)"},
	} {
		resolve, err := secretResolver([]string{"acme/api-token=" + c.src})
		if err != nil {
			t.Fatal(err)
		}
		_, err = resolve(t.Context(), "acme/api-token")
		var r *refusal.Error
		if !errors.As(err, &r) || r.Code != c.code || r.Message() != c.want {
			t.Errorf("%s: %v\nwant %s: %s", c.src, err, c.code, c.want)
		}
	}
}
