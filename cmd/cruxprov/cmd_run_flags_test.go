package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunSecretSourceNamesNothing: --secret REF=@ and REF=env:, a source
// that names no file or variable (--secret REF=@$F with F unset), are
// usage errors, as REF= is, before anything is read or run; they ran and
// were refused secret_unresolved ("stat : no such file or directory")
// with a receipt once the pin had named the env. The provider here has no
// pin: without the check the run got as far as pin_unapproved.
func TestRunSecretSourceNamesNothing(t *testing.T) {
	in := filepath.Join(t.TempDir(), "in.json")
	if err := os.WriteFile(in, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(t.TempDir(), "state")
	for src, want := range map[string]string{
		"@":    "usage: --secret acme/api-token=@ names no file (an unset shell variable?): want acme/api-token=@FILE or acme/api-token=env:VAR",
		"env:": "usage: --secret acme/api-token=env: names no variable (an unset shell variable?): want acme/api-token=@FILE or acme/api-token=env:VAR",
	} {
		t.Run(src, func(t *testing.T) {
			r := cruxprov(t, "run", "acme-echo", "echo", "--input", in, "--secret", "acme/api-token="+src, "--state-dir", state)
			if r.code != exitUsage || !strings.HasPrefix(r.stderr, want) || strings.Count(r.stderr, "\n") != 1 {
				t.Fatalf("--secret acme/api-token=%s: exit %d, stderr %q; want exit %d, %q", src, r.code, r.stderr, exitUsage, want)
			}
			if _, err := os.Stat(state); !os.IsNotExist(err) {
				t.Errorf("a usage error made the state directory: %v", err)
			}
		})
	}
}

// TestRunAllowEnvTakesNames: --allow-env NAME=VALUE is a usage error
// naming what to give, its value not shown; it ran the provider without
// the variable (the allowlist matched no name), without a word.
func TestRunAllowEnvTakesNames(t *testing.T) {
	in := filepath.Join(t.TempDir(), "in.json")
	if err := os.WriteFile(in, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := cruxprov(t, "run", "acme-echo", "echo", "--input", in, "--allow-env", "LANG", "--allow-env", "TOKEN=s3cr3t")
	want := `usage: --allow-env "TOKEN=…": give a variable's NAME, not NAME=VALUE (what follows = is not shown): --allow-env TOKEN passes TOKEN with the value this run's environment gives it`
	if r.code != exitUsage || !strings.HasPrefix(r.stderr, want) || strings.Contains(r.stderr, "s3cr3t") {
		t.Fatalf("--allow-env TOKEN=…: exit %d, stderr %q; want exit %d, %q", r.code, r.stderr, exitUsage, want)
	}
}

// TestRunSecretGivenTwice: two --secret flags for one ref are a usage
// error; the last was delivered, whichever of a wrapper's and the job's
// own flags that was, without a word.
func TestRunSecretGivenTwice(t *testing.T) {
	dir := t.TempDir()
	in, tok := filepath.Join(dir, "in.json"), filepath.Join(dir, "tok")
	for _, f := range []string{in, tok} {
		if err := os.WriteFile(f, []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r := cruxprov(t, "run", "acme-echo", "echo", "--input", in, "--secret", "acme/api-token=@"+tok, "--secret", "acme/api-token=env:TOKEN")
	want := "usage: --secret acme/api-token is given twice: give each secret once"
	if r.code != exitUsage || !strings.HasPrefix(r.stderr, want) {
		t.Fatalf("--secret given twice: exit %d, stderr %q; want exit %d, %q", r.code, r.stderr, exitUsage, want)
	}
}

// TestRunAllowEnvNotAName: an --allow-env that is empty or holds a space
// ("LANG LC_ALL", two names in one argument) matched no variable and ran
// the provider without them, without a word; it is a usage error.
func TestRunAllowEnvNotAName(t *testing.T) {
	in := filepath.Join(t.TempDir(), "in.json")
	if err := os.WriteFile(in, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"LANG LC_ALL", "A\tB"} {
		r := cruxprov(t, "run", "acme-echo", "echo", "--input", in, "--allow-env", bad)
		want := fmt.Sprintf("usage: --allow-env %q is not a variable's name: give one NAME per --allow-env", bad)
		if r.code != exitUsage || !strings.HasPrefix(r.stderr, want) {
			t.Errorf("--allow-env %q: exit %d, stderr %q; want exit %d, %q", bad, r.code, r.stderr, exitUsage, want)
		}
	}
}
