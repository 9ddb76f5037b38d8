package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/internal/fixtures"
)

// TestFetchMakesNoStoreInADirectoryOfOtherThings: a --home mistyped as
// a directory of other things (the wheels' directory, the user's own
// home) was filled with a store's layout (.lock, .gate, blobs/, envs/,
// oci/, receipts/, registry/, tmp/) by fetch and env create, even by an
// --offline fetch that was then refused offline_miss, its fix line the
// same --home again. gc and the commands that only read said there is no
// store there; fetch and env create say they cannot use it as the store,
// exit 1, and leave it as it was. An empty directory, or one holding only
// lost+found (a file system made for the store), is made a store. Found
// walking operator.md §4 with --home wheels.
func TestFetchMakesNoStoreInADirectoryOfOtherThings(t *testing.T) {
	fx := fixtures.ForTest(t, fixtures.Options{})
	wheel := fx.Echo.Path
	for _, args := range [][]string{
		{"fetch", "--wheel", wheel, "--platform", "cp311-manylinux_2_36_x86_64", "--offline"},
		{"fetch", "--wheel", wheel, "--platform", "cp311-manylinux_2_36_x86_64", "--index", "http://127.0.0.1:9/simple/"},
		{"env", "create", "--wheel", wheel, "--platform", "host", "--python", "/usr/bin/python3", "--offline"},
	} {
		t.Run(strings.Join(args[:2], " "), func(t *testing.T) {
			home := t.TempDir()
			if err := os.WriteFile(filepath.Join(home, "notes.txt"), []byte("mine\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			r := cruxprov(t, append([]string{"--home", home}, args...)...)
			want := "error: cannot use " + home + " as the store: the directory holds other things and none of a store's files"
			if r.code != 1 || !strings.HasPrefix(r.stderr, want) || strings.Count(r.stderr, "\n") != 1 ||
				!strings.Contains(r.stderr, "check --home (or CRUXPROV_HOME)") {
				t.Errorf("%v at a directory of other things: %+v, want exit 1 %q", args, r, want)
			}
			if ents, _ := os.ReadDir(home); len(ents) != 1 {
				var names []string
				for _, e := range ents {
					names = append(names, e.Name())
				}
				t.Errorf("%v left %v in the directory of other things", args, names)
			}
		})
	}
	// Empty but for lost+found: a store is made there.
	home := t.TempDir()
	if err := os.Mkdir(filepath.Join(home, "lost+found"), 0o700); err != nil {
		t.Fatal(err)
	}
	if r := cruxprov(t, "--home", home, "fetch", "--wheel", wheel, "--platform", "cp311-manylinux_2_36_x86_64", "--offline"); r.code != exitRefused || !strings.HasPrefix(r.stderr, "refused: offline_miss: ") {
		t.Fatalf("fetch --offline at a new file system's root: %+v, want offline_miss", r)
	}
	ents, _ := os.ReadDir(home)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !slices.Contains(names, ".lock") || !slices.Contains(names, "blobs") || !slices.Contains(names, "lost+found") {
		t.Errorf("a store at a directory holding only lost+found: %v", names)
	}
}
