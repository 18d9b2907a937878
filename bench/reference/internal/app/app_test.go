package app

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestTruncateKeepsWholeCharacters(t *testing.T) {
	if got := Truncate("abc", 5); got != "abc" {
		t.Errorf("got %q", got)
	}
	if got := Truncate("ab☃", 4); got != "ab" { // ☃ is 3 bytes
		t.Errorf("got %q", got)
	}
	if got := Truncate(strings.Repeat("x", 2000), MaxMessage); len(got) != MaxMessage {
		t.Errorf("len %d", len(got))
	}
}

func TestParallelBoundsInFlightAndKeepsErrorsInOrder(t *testing.T) {
	var inFlight, peak atomic.Int32
	tasks := make([]func() error, 3*MaxParallelRequests)
	for i := range tasks {
		tasks[i] = func() error {
			n := inFlight.Add(1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			time.Sleep(time.Millisecond)
			inFlight.Add(-1)
			if i%2 == 1 {
				return errors.New("odd")
			}
			return nil
		}
	}
	errs := Parallel(tasks)
	for i, err := range errs {
		if (err != nil) != (i%2 == 1) {
			t.Errorf("task %d: %v", i, err)
		}
	}
	if peak.Load() > MaxParallelRequests {
		t.Errorf("%d in flight, at most %d allowed", peak.Load(), MaxParallelRequests)
	}
}
