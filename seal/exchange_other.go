//go:build !linux

package seal

// exchange swaps the directories a and b, in two renames where there is
// no renameat2 (exchangeByRenames).
func exchange(a, b string) error { return exchangeByRenames(a, b) }
