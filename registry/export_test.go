package registry

// SetCrashAt sets the hook a commit calls at each of its steps
// ("journal", "file", "history-torn", "history"), for the crash tests;
// an error it returns is that step's.
func SetCrashAt(f func(step string) error) { crashAt = f }

// FloorRefusal is the refusal of fe as the floor's reads and writes
// make it (floorRefusal).
func FloorRefusal(fe *FloorError) error { return floorRefusal(fe, "floor %s", fe.Path) }
