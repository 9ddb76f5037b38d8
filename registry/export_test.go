package registry

// SetCrashAt sets the hook a commit calls at each of its steps
// ("journal", "file", "history-torn", "history"), for the crash tests.
func SetCrashAt(f func(step string)) { crashAt = f }
