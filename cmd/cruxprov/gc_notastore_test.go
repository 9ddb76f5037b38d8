package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestNoStoreInADirectoryOfOtherThings: a --home naming a directory that
// holds no store (a typo for the store, the user's own home) was, for gc,
// a store to make: it wrote the whole layout there (blobs/, envs/, oci/,
// registry/, receipts/, tmp/, .lock, .gate) and exited 0, and registry
// repair made registry/ there. Each says there is no store, writes
// nothing and exits 1; the read-only commands say the same instead of
// answering for an empty store. An empty directory may still be made a
// store (TestReadOnlyStoreSaysNotWritable's gc makes one).
func TestNoStoreInADirectoryOfOtherThings(t *testing.T) {
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "notes.txt"), []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"gc"}, {"gc", "--envs"}, {"gc", "--dry-run"}, {"registry", "repair"}, {"registry", "log"}, {"env", "list"}, {"changeset", "list"}} {
		r := cruxprov(t, append([]string{"--home", home}, args...)...)
		if r.code != exitFailure || !strings.Contains(r.stderr, "there is no store at "+home+": the directory holds other things and none of a store's files") {
			t.Errorf("%v in a directory of other things: %+v", args, r)
		}
		ents, err := os.ReadDir(home)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		if !slices.Equal(names, []string{"notes.txt"}) {
			t.Fatalf("%v wrote into the directory: %v", args, names)
		}
	}
}
