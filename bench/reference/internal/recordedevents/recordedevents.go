// Package recordedevents reads what a test's record.FakeRecorder was given.
package recordedevents

import (
	"sort"

	"k8s.io/client-go/tools/record"
)

// Drain returns the Events recorder recorded so far ("<type> <reason> <message>"), sorted, and
// empties it. recorder must be a *record.FakeRecorder.
func Drain(recorder record.EventRecorder) []string {
	var out []string
	for ch := recorder.(*record.FakeRecorder).Events; len(ch) > 0; {
		out = append(out, <-ch)
	}
	sort.Strings(out)
	return out
}
