package invoke

// WithoutShell makes this process's runs go as where there is no
// /bin/sh (the harness forks its own init; the env's interpreter asks
// the kernel for the namespaces) until the returned func is called.
func WithoutShell() (restore func()) {
	old := initShell
	initShell = ""
	forgetNamespaces()
	return func() {
		initShell = old
		forgetNamespaces()
	}
}

// InstalledRuntime is installedRuntime, for TestInstalledRuntime.
var InstalledRuntime = installedRuntime
