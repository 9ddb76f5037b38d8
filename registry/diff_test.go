package registry_test

import (
	"context"
	"testing"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
)

func TestDiff(t *testing.T) {
	ctx := context.Background()
	r := registry.NewStub()
	root := registrytest.NewKey(t, "root", registry.RoleApprover)
	r.TrustKey(ctx, root.Key, "t")
	v1 := registrytest.Change("acme-echo", "1.0")
	v1.Provider.Materializations[0].Packages = append(v1.Provider.Materializations[0].Packages,
		registry.Package{Name: "six", Version: "1.16.0", Filename: "six-1.16.0-py2.py3-none-any.whl", SHA256: digest.Sum([]byte("six"))},
		registry.Package{Name: "idna", Version: "3.7", Filename: "idna-3.7-py3-none-any.whl", SHA256: digest.Sum([]byte("idna"))},
		registry.Package{Name: "gone", Version: "1", Filename: "gone-1-py3-none-any.whl", SHA256: digest.Sum([]byte("gone"))})
	cs1, _, _ := r.Propose(ctx, v1, "t")
	// The JSON plan names the change-set, as the text's first line does.
	if p := registry.Diff(nil, cs1); p.ID != cs1.Metadata.ID || len(p.Packages) != 4 || p.Packages[0].Change != "added" || p.FromRevision != 0 || p.ToRevision != 1 {
		t.Fatalf("first plan: %+v", p)
	}
	res, err := r.Approve(ctx, cs1.Metadata.ID, root.Priv, nil)
	if err != nil {
		t.Fatal(err)
	}
	v2 := registrytest.Change("acme-echo", "2.0")
	v2.Provider.Secrets = []string{"token", "password"}
	v2.Provider.Egress = nil
	v2.Provider.Budgets = map[string]int64{"timeoutMs": 5000}
	v2.Provider.Materializations[0].Packages = append(v2.Provider.Materializations[0].Packages,
		registry.Package{Name: "six", Version: "1.16.0", Filename: "six-1.16.0-py2.py3-none-any.whl", SHA256: digest.Sum([]byte("six2"))},
		registry.Package{Name: "idna", Version: "3.6", Filename: "idna-3.6-py3-none-any.whl", SHA256: digest.Sum([]byte("idna6"))},
		registry.Package{Name: "new", Version: "1", Filename: "new-1-py3-none-any.whl", SHA256: digest.Sum([]byte("new"))})
	cs2, _, _ := r.Propose(ctx, v2, "t")
	p := registry.Diff(res.Pin, cs2)
	want := map[string]string{"acme-echo": "upgraded", "six": "hash-changed", "idna": "downgraded", "gone": "removed", "new": "added"}
	if len(p.Packages) != len(want) {
		t.Fatalf("%+v", p.Packages)
	}
	for _, c := range p.Packages {
		t.Run(c.Name, func(t *testing.T) {
			if want[c.Name] != c.Change {
				t.Fatalf("%s: %s, want %s", c.Name, c.Change, want[c.Name])
			}
		})
	}
	seal := false
	for _, d := range p.Digests {
		seal = seal || d.What == "local linux_x86_64-cp312 seal content (interpreter identity)"
	}
	if !seal || p.FromRevision != 1 || p.ToRevision != 2 {
		t.Fatalf("%+v", p)
	}
	if len(p.Secrets.Added) != 1 || p.Secrets.Added[0] != "password" || len(p.Egress.Removed) != 1 {
		t.Fatalf("secrets %+v egress %+v", p.Secrets, p.Egress)
	}
	if len(p.Budgets) != 1 || !p.Budgets[0].Raised || p.Budgets[0].New != 5000 {
		t.Fatalf("%+v", p.Budgets)
	}
}
