package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/internal/fixtures"
	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/refusal"
)

// TestRetiredAdviceRuns: verify and run of a retired provider advised
// `cruxprov install WHEEL --platform PLATFORM --python PYTHON`: the
// retirement's spec names the provider alone, so an operator who wanted
// it back had to find its wheel, sha256, platforms, interpreter and
// bytecode choice in the history. The advice now names those of the pin
// the retirement replaced, and, run as printed (the index filled in), it
// proposes that very provider again (its change-set's provider is the
// retired pin's, byte for byte: the same env, made without bytecode),
// which approved, verifies and runs again.
func TestRetiredAdviceRuns(t *testing.T) {
	if _, err := os.Stat(debian); err != nil {
		t.Skipf("needs %s", debian)
	}
	base := testdir.New(t)
	w := newGovernedWorld(t, base, fixtures.ForTest(t, fixtures.Options{}))
	run, must, approveInstall := approvingStore(t, w, base, debian)
	key := filepath.Join(base, "keys", "k.key")
	approveInstall()
	provider := func(r result) any {
		t.Helper()
		var doc struct {
			Spec struct {
				Changes []struct{ Provider any }
			}
		}
		if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || len(doc.Spec.Changes) != 1 {
			t.Fatalf("no provider in %+v (%v)", r, err)
		}
		return doc.Spec.Changes[0].Provider
	}
	ran := provider(must("provider", "show", "acme-echo", "--json"))
	must("changeset", "approve", strings.TrimSpace(must("provider", "retire", "acme-echo", "--quiet").stdout), "--key", key)
	// provider show names what it ran until retired; it said "retired"
	// alone.
	if r := must("provider", "show", "acme-echo"); !regexp.MustCompile(`(?m)^retired   the pin of revision 1: acme-echo 1\.0\.0 sha256:[0-9a-f]{64} \(change-set sha256:[0-9a-f]{64}\); 'cruxprov verify acme-echo' advises how to propose it again$`).MatchString(r.stdout) {
		t.Errorf("provider show of the retired provider: %q", r.stdout)
	}

	in := filepath.Join(base, "in.json")
	os.WriteFile(in, []byte(`{"hello": "world"}`), 0o644)
	token := filepath.Join(base, "token")
	os.WriteFile(token, []byte("tok"), 0o600)
	var advised result
	for _, args := range [][]string{{"verify", "acme-echo"}, {"run", "acme-echo", "echo", "--input", in, "--secret", "acme/api-token=@" + token}} {
		r := run(args...)
		wantRefusal(t, r, string(refusal.PinUnapproved), strings.Join(args, " ")+" of a retired provider")
		fix := fixRE.FindStringSubmatch(strings.TrimSpace(r.stderr))
		if fix == nil || !strings.Contains(r.stderr, "was retired at revision 2 (") ||
			!strings.HasPrefix(fix[1], "cruxprov install acme-echo==1.0.0 --sha256 ") || !strings.Contains(fix[1], " --python "+debian+" --no-compile ") ||
			regexp.MustCompile(`\bWHEEL\b|\bPLATFORM\b|\bPYTHON\b`).MatchString(fix[1]) {
			t.Fatalf("%v: the advice does not propose the retired pin again: %+v", args, r)
		}
		advised = r
	}
	advised.stderr = strings.ReplaceAll(advised.stderr, "--index URL", "--index "+w.url)
	f := runFix(t, advised, base, "CRUXPROV_KEY_PASSWORD=pw", "XDG_STATE_HOME="+filepath.Join(base, "state"))
	id := regexp.MustCompile(`proposed change-set (sha256:[0-9a-f]{64})`).FindStringSubmatch(f.stdout)
	if f.code != 0 || id == nil {
		t.Fatalf("the advice as printed: %+v", f)
	}
	if again := provider(must("changeset", "show", id[1], "--json")); !reflect.DeepEqual(again, ran) {
		t.Fatalf("the advice proposes another provider than the one retired:\n%v\nwant\n%v", again, ran)
	}
	must("changeset", "approve", id[1], "--key", key)
	must("verify", "acme-echo")
	if r := must("run", "acme-echo", "echo", "--input", in, "--secret", "acme/api-token=@"+token); !strings.Contains(r.stdout, `"hello":"world"`) {
		t.Fatalf("run after the advice: %+v", r)
	}
}
