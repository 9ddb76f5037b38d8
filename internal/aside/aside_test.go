package aside

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestRun: Run returns f's result, or ctx's error at once when ctx ends
// first, while f runs on.
func TestRun(t *testing.T) {
	v, err := Run(context.Background(), func() (int, error) { return 7, nil })
	if v != 7 || err != nil {
		t.Fatalf("%d %v", v, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	release := make(chan struct{})
	defer close(release)
	time.AfterFunc(10*time.Millisecond, cancel)
	start := time.Now()
	v, err = Run(ctx, func() (int, error) { <-release; return 7, nil })
	if v != 0 || !errors.Is(err, context.Canceled) || time.Since(start) > 5*time.Second {
		t.Fatalf("%d %v after %s", v, err, time.Since(start))
	}
}
