package invoke_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/invoke"
	"github.com/cruxible/cruxprov/refusal"
)

// TestResolverFailureSaysWhatToDo: a Go executor's resolver that fails
// with an error of its own, or gives a value that is not text, has the
// run refused secret_unresolved in words that say what to do, after the
// resolver's own. It said "secret "acme/beta" has no value: vault
// sealed" and "secret "acme/beta" is not valid UTF-8 text", and no more
// (the command line's resolver says it in its own refusals).
func TestResolverFailureSaysWhatToDo(t *testing.T) {
	f := fixture(t)
	for name, tc := range map[string]struct {
		resolve func(context.Context, string) (string, error)
		want    []string
	}{
		"the resolver fails": {func(_ context.Context, ref string) (string, error) {
			if ref == "acme/beta" {
				return "", errors.New("vault sealed")
			}
			return "x", nil
		}, []string{`secret "acme/beta" has no value`, "vault sealed", "the manifest declares it"}},
		"a value that is not text": {func(_ context.Context, ref string) (string, error) { return "\xff", nil },
			[]string{`secret "acme/alpha" is not valid UTF-8 text`, "base64"}},
	} {
		l, _ := openLedger(t)
		ex := &invoke.Subprocess{Ledger: l, WorkdirParent: t.TempDir()}
		c := f.Call("probe", nil, nil)
		c.Resolve = tc.resolve
		res, err := ex.Run(context.Background(), c)
		if res != nil || refusal.CodeOf(err) != refusal.SecretUnresolved {
			t.Fatalf("%s: %+v, %v; want secret_unresolved", name, res, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", name, err, w)
			}
		}
		if n := strings.Count(err.Error(), "vault sealed"); n > 1 {
			t.Errorf("%s: the resolver's error said %d times: %v", name, n, err)
		}
	}
}
