package pipeline

import (
	"context"

	"github.com/cruxible/cruxprov/seal"
)

// SetMaxRoot bounds a root wheel fetched as NAME==VERSION at n bytes
// until the function it returns puts the bound back.
func SetMaxRoot(n int64) (restore func()) {
	old := maxRoot
	maxRoot = n
	return func() { maxRoot = old }
}

// Put puts the root wheel in the store, as a Run that builds an env does.
func (w *RootWheel) Put(ctx context.Context) error { return w.put(ctx) }

// FetchedRoot is fetchedRoot(w): what w adds to a create's Fetched.
func FetchedRoot(w *RootWheel) int { return fetchedRoot(w) }

// FromSeal is fromSeal's refusal of the seal s of the env at dir.
func FromSeal(s *seal.Seal, dir string) error {
	_, _, err := fromSeal(s, dir)
	return err
}
