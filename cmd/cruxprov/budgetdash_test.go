package main

import (
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/registry"
)

// TestPlanBudgetNoneIsDash: a budget the pin has not (a registration's,
// or one the new manifest drops) is "-" in the text plan, as every other
// value a pin does not have: a new-user walk's first diff said
// "budget timeout_ms: 0 → 30000 (set)", a limit of zero to the reader.
func TestPlanBudgetNoneIsDash(t *testing.T) {
	cs := &registry.ChangeSet{}
	cs.Status.State = registry.StateProposed
	p := &registry.Plan{Provider: "acme-echo", Action: "register", ToRevision: 1, Budgets: []registry.BudgetChange{
		{Name: "timeout_ms", Old: 0, New: 30000},
		{Name: "output_bytes", Old: 1048576, New: 0},
	}}
	var b strings.Builder
	printPlan(&b, cs, p, "")
	for _, want := range []string{
		"~ budget timeout_ms: - → 30000 (set)\n",
		"~ budget output_bytes: 1048576 → - (removed: the executor's default applies)\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("plan lacks %q:\n%s", want, b.String())
		}
	}
}
