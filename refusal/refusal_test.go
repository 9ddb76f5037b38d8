package refusal

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"testing"
)

func TestErrorsIsAs(t *testing.T) {
	err := fmt.Errorf("installing: %w", Wrap(HashMismatch, io.ErrUnexpectedEOF, "wheel %s", "a.whl"))
	if !errors.Is(err, HashMismatch) {
		t.Fatal("errors.Is(code) failed")
	}
	if errors.Is(err, SizeMismatch) {
		t.Fatal("matched another code")
	}
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatal("cause not unwrapped")
	}
	var r *Error
	if !errors.As(err, &r) || r.Code != HashMismatch || r.Detail != "wheel a.whl" {
		t.Fatalf("errors.As: %#v", r)
	}
	if CodeOf(err) != HashMismatch || CodeOf(io.EOF) != "" {
		t.Fatal("CodeOf")
	}
	if !errors.Is(err, &Error{}) {
		t.Fatal("any-refusal target")
	}
}

func TestCodesClosed(t *testing.T) {
	seen := map[Code]bool{}
	for _, c := range Codes() {
		if seen[c] || !Known(c) {
			t.Fatalf("code %q duplicated or unknown", c)
		}
		seen[c] = true
	}
	if Known("made_up") {
		t.Fatal("unknown code reported known")
	}
}

// TestMessageSaysTheCauseOnce: a detail that quotes its cause (to say
// what to do after it, as a push refusal does) is not followed by the
// cause again; any other detail is.
func TestMessageSaysTheCauseOnce(t *testing.T) {
	cause := errors.New("Put http://r/v2/x: connection refused")
	for _, c := range []struct {
		name string
		err  *Error
		want string
	}{
		{"no cause", New(FetchFailed, "cannot push"), "cannot push"},
		{"cause apart", Wrap(FetchFailed, cause, "cannot push to r/x"), "cannot push to r/x: Put http://r/v2/x: connection refused"},
		{"cause quoted", Wrap(FetchFailed, cause, "cannot push to r/x: %v (the registry was not reached); run the build again", cause),
			"cannot push to r/x: Put http://r/v2/x: connection refused (the registry was not reached); run the build again"},
		{"empty cause", Wrap(FetchFailed, errors.New(""), "cannot push"), "cannot push"},
		// A short cause whose text happens to be in the detail, not as
		// its quote, is still said: the detail does not say it.
		{"cause in a name", Wrap(FetchFailed, io.EOF, "cannot read %q from the archive; fetch the wheel again", "EOF.txt"),
			`cannot read "EOF.txt" from the archive; fetch the wheel again: EOF`},
		{"cause in a word", Wrap(FetchFailed, io.EOF, "downloading a.whl: unexpected EOF after 3 tries"),
			"downloading a.whl: unexpected EOF after 3 tries: EOF"},
		{"cause quoted last", Wrap(FetchFailed, io.ErrUnexpectedEOF, "downloading a.whl: %v", io.ErrUnexpectedEOF),
			"downloading a.whl: unexpected EOF"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.err.Message(); got != c.want {
				t.Errorf("Message() = %q, want %q", got, c.want)
			}
			if got := c.err.Error(); got != "fetch_failed: "+c.want {
				t.Errorf("Error() = %q", got)
			}
			if c.err.Err != nil && !errors.Is(c.err, c.err.Err) {
				t.Errorf("the cause is not kept in the chain")
			}
		})
	}
}

// TestRemedyJSONKeysSnakeCase: every key of a Remedy's JSON is
// snake_case, as the refusal's other keys and its actions are
// ("no_bytecode"): NoBytecode's was "noBytecode", the one camelCase key.
func TestRemedyJSONKeysSnakeCase(t *testing.T) {
	r := Remedy{Action: ActionRebuildEnv, Target: "t", Images: []string{"i"}, Name: "n", Platforms: []string{"p"},
		Python: "py", Package: "pkg", NoBytecode: true, Backend: "b", Or: &Remedy{Action: ActionGC}}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if n := reflect.TypeOf(r).NumField(); len(m) != n {
		t.Errorf("%s: %d keys, want one for each of Remedy's %d fields", b, len(m), n)
	}
	snake := regexp.MustCompile(`^[a-z]+(_[a-z]+)*$`)
	for k := range m {
		if !snake.MatchString(k) {
			t.Errorf("remedy key %q is not snake_case", k)
		}
	}
	if _, ok := m["no_bytecode"]; !ok {
		t.Errorf("%s: no \"no_bytecode\"", b)
	}
}
