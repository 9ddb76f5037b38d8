package pipeline

// SetMaxRoot bounds a root wheel fetched as NAME==VERSION at n bytes
// until the function it returns puts the bound back.
func SetMaxRoot(n int64) (restore func()) {
	old := maxRoot
	maxRoot = n
	return func() { maxRoot = old }
}
