package main

import (
	"os"
	"strings"
)

// hugePagesOff says whether GODEBUG turns huge pages off (disablethp=1):
// the switch of this command's two tricks against page faults, its heap's
// huge pages and its compile processes' malloc tuning (docs/seal.md,
// "Tricks").
func hugePagesOff() bool {
	for _, kv := range strings.Split(os.Getenv("GODEBUG"), ",") {
		if strings.TrimSpace(kv) == "disablethp=1" {
			return true
		}
	}
	return false
}
