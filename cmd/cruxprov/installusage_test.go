package main

import (
	"strings"
	"testing"
)

// everyFormFlags are the flags of a usage line outside every [ ] and
// ( | ) group: those it says every form of the command needs.
func everyFormFlags(usage string) []string {
	var out []string
	depth := 0
	for _, f := range strings.FieldsFunc(usage, func(r rune) bool { return r == ' ' || r == '\n' }) {
		if depth == 0 && strings.HasPrefix(f, "--") {
			out = append(out, strings.TrimRight(f, "])…"))
		}
		depth += strings.Count(f, "(") + strings.Count(f, "[") - strings.Count(f, ")") - strings.Count(f, "]")
	}
	return out
}

// TestInstallUsageContainerForm: install's usage line said --platform
// (and --index) were needed by every install, though --backend container
// --image installs the images' platforms without one (as
// TestPrivateCARegistry's install does) and --offline needs no index.
func TestInstallUsageContainerForm(t *testing.T) {
	c := findCommand(newApp(nil, nil).Commands, "install")
	if c == nil {
		t.Fatal("no install command")
	}
	if got := everyFormFlags(c.UsageText); len(got) != 0 {
		t.Errorf("install's usage %q says every install needs %v", c.UsageText, got)
	}
	for _, want := range []string{"(--platform P[,P…] | --backend container --image REF@DIGEST… [--platform P[,P…]])", "(--index URL | --offline)", "[--ca-bundle F]"} {
		if !strings.Contains(c.UsageText, want) {
			t.Errorf("install's usage %q does not say %s", c.UsageText, want)
		}
	}
	if got := everyFormFlags("cruxprov x --a A [--b B] (--c | --d [--e]) --f F…"); strings.Join(got, " ") != "--a --f" {
		t.Errorf("everyFormFlags: %v", got)
	}
}
