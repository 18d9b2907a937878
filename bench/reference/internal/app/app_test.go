package app

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache/informertest"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllertest"
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

func TestReadyOnlyOnceTheWatchedCachesSynced(t *testing.T) {
	informers := &informertest.FakeInformers{Scheme: clientgoscheme.Scheme}
	check := CacheSynced(informers, &corev1.Pod{}, &corev1.ConfigMap{})
	request := httptest.NewRequest(http.MethodGet, "/readyz", nil)
	pods := controllertest.NewFakeInformer()
	informers.InformersByGVK = map[schema.GroupVersionKind]toolscache.SharedIndexInformer{
		corev1.SchemeGroupVersion.WithKind("Pod"): pods,
	}
	if err := check(request); err == nil {
		t.Error("ready while the pod cache has not synced")
	}
	pods.Synced()
	if err := check(request); err != nil {
		t.Errorf("not ready once every cache synced: %v", err)
	}
}
