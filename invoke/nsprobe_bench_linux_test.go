package invoke

import "testing"

// BenchmarkNamespacesProbe is what asking the kernel whether a run may
// have its namespaces costs: once per process (a `cruxprov run` pays it
// once per run, an executor that stays up once).
func BenchmarkNamespacesProbe(b *testing.B) {
	if nsProbe() == nil {
		b.Skip("no shell to ask with here")
	}
	for b.Loop() {
		forgetNamespaces()
		if !namespacesAllowed(nsProbe()) {
			b.Skip("the kernel refuses the namespaces here")
		}
	}
}
