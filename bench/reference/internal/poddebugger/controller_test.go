package poddebugger

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"opsuite.dev/bench/reference/api"
	"opsuite.dev/bench/reference/internal/app"
	"opsuite.dev/bench/reference/internal/recordedevents"
)

func pod(name string, age time.Duration, phase corev1.PodPhase, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name), Labels: labels,
			CreationTimestamp: metav1.NewTime(time.Now().Add(-age).Truncate(time.Second))},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "nginx"}}},
		Status: corev1.PodStatus{Phase: phase},
	}
}

func setup(t *testing.T, maxPods int32, objs ...client.Object) (*Reconciler, client.Client, *atomic.Int32) {
	t.Helper()
	debugger := &api.PodDebugger{
		ObjectMeta: metav1.ObjectMeta{Name: "shell", Namespace: "ns", UID: "d-uid", Generation: 2},
		Spec: api.PodDebuggerSpec{Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Image: "busybox:1.37", Command: []string{"sleep", "3600"}, MaxPods: &maxPods},
	}
	patches := &atomic.Int32{}
	c := fake.NewClientBuilder().
		WithScheme(app.NewScheme(api.AddPodDebugger)).
		WithStatusSubresource(&api.PodDebugger{}).
		WithObjects(append(objs, debugger)...).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				if sub == "ephemeralcontainers" {
					patches.Add(1)
				}
				return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			},
		}).
		Build()
	return &Reconciler{Client: c, Recorder: record.NewFakeRecorder(100)}, c, patches
}

func reconcileOnce(t *testing.T, r *Reconciler) {
	t.Helper()
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "shell"}}); err != nil {
		t.Fatal(err)
	}
}

func containers(t *testing.T, c client.Client, name string) []string {
	t.Helper()
	var p corev1.Pod
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: name}, &p); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range p.Spec.EphemeralContainers {
		names = append(names, e.Name)
	}
	return names
}

func TestInjectsOnceIntoEveryMatchingLivePod(t *testing.T) {
	web := map[string]string{"app": "web"}
	r, c, patches := setup(t, 10,
		pod("a", time.Hour, corev1.PodRunning, web),
		pod("b", time.Minute, corev1.PodPending, web),
		pod("done", time.Hour, corev1.PodSucceeded, web),
		pod("other", time.Hour, corev1.PodRunning, map[string]string{"app": "db"}),
	)
	reconcileOnce(t, r)
	want := "pdbg-shell-ce635c4eee4f01367c"
	for _, name := range []string{"a", "b"} {
		if got := containers(t, c, name); len(got) != 1 || got[0] != want {
			t.Errorf("pod %s: containers %v, want [%s]", name, got, want)
		}
	}
	for _, name := range []string{"done", "other"} {
		if got := containers(t, c, name); len(got) != 0 {
			t.Errorf("pod %s: containers %v, want none", name, got)
		}
	}
	wantEvents := []string{
		"Normal DebugContainerAdded PodDebugger shell added " + want + " (image busybox:1.37)", // on pod a
		"Normal DebugContainerAdded PodDebugger shell added " + want + " (image busybox:1.37)", // on pod b
		"Normal DebugContainerAdded added " + want + " (image busybox:1.37) to pod a",
		"Normal DebugContainerAdded added " + want + " (image busybox:1.37) to pod b",
	}
	if got := recordedevents.Drain(r.Recorder); !slices.Equal(got, wantEvents) {
		t.Errorf("events %v, want %v", got, wantEvents)
	}
	reconcileOnce(t, r)
	if got := recordedevents.Drain(r.Recorder); len(got) != 0 {
		t.Errorf("events after a pass with nothing to do: %v", got)
	}
	if patches.Load() != 2 {
		t.Errorf("%d patches, want 2 (none on the second pass)", patches.Load())
	}
	var d api.PodDebugger
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "shell"}, &d); err != nil {
		t.Fatal(err)
	}
	want2 := api.PodDebuggerStatus{MatchedPods: 2, DebuggedCount: 2, DebuggedPodsTotal: 2, ObservedGeneration: 2}
	if d.Status.MatchedPods != want2.MatchedPods || d.Status.DebuggedCount != want2.DebuggedCount ||
		d.Status.DebuggedPodsTotal != want2.DebuggedPodsTotal || d.Status.SkippedPods != 0 ||
		d.Status.ObservedGeneration != 2 || len(d.Status.FailedPods) != 0 {
		t.Errorf("status %+v, want %+v", d.Status, want2)
	}
}

func TestSentContainerIsNotSentAgainOnAStaleCache(t *testing.T) {
	web := map[string]string{"app": "web"}
	r, _, patches := setup(t, 10, pod("a", time.Hour, corev1.PodRunning, web))
	reconcileOnce(t, r)
	stale := pod("a", time.Hour, corev1.PodRunning, web) // what a lagging cache still holds
	p := r.plan(&api.PodDebugger{ObjectMeta: metav1.ObjectMeta{Name: "shell"}}, []corev1.Pod{*stale}, "pdbg-shell-ce635c4eee4f01367c")
	if len(p.inject) != 0 || p.status.DebuggedCount != 1 || patches.Load() != 1 {
		t.Errorf("plan on a stale cache injects %d, counts %d debugged", len(p.inject), p.status.DebuggedCount)
	}
}

func TestMaxPodsPrefersHoldersThenTheOldest(t *testing.T) {
	web := map[string]string{"app": "web"}
	holder := pod("holder", time.Minute, corev1.PodRunning, web)
	holder.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "pdbg-shell-ce635c4eee4f01367c", Image: "busybox:1.37"}}}
	r, c, _ := setup(t, 3,
		holder,
		pod("new", time.Second, corev1.PodRunning, web),
		pod("old", time.Hour, corev1.PodRunning, web),
		pod("older", 2*time.Hour, corev1.PodRunning, web),
	)
	reconcileOnce(t, r)
	for name, n := range map[string]int{"holder": 1, "older": 1, "old": 1, "new": 0} {
		if got := containers(t, c, name); len(got) != n {
			t.Errorf("pod %s: containers %v, want %d", name, got, n)
		}
	}
	var d api.PodDebugger
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "shell"}, &d); err != nil {
		t.Fatal(err)
	}
	if d.Status.MatchedPods != 4 || d.Status.DebuggedCount != 3 || d.Status.SkippedPods != 1 {
		t.Errorf("status %+v", d.Status)
	}
}

func TestPodEventsMapToTheMatchingDebuggers(t *testing.T) {
	r, _, _ := setup(t, 10)
	got := r.debuggersForPod(context.Background(), pod("x", 0, corev1.PodRunning, map[string]string{"app": "web"}))
	if len(got) != 1 || got[0].Name != "shell" {
		t.Errorf("got %v", got)
	}
	if got := r.debuggersForPod(context.Background(), pod("y", 0, corev1.PodRunning, map[string]string{"app": "db"})); len(got) != 0 {
		t.Errorf("got %v", got)
	}
}

func TestARefusalIsReportedAndRetried(t *testing.T) {
	web := map[string]string{"app": "web"}
	debugger := &api.PodDebugger{
		ObjectMeta: metav1.ObjectMeta{Name: "shell", Namespace: "ns"},
		Spec:       api.PodDebuggerSpec{Selector: metav1.LabelSelector{MatchLabels: web}, Image: "busybox"},
	}
	c := fake.NewClientBuilder().WithScheme(app.NewScheme(api.AddPodDebugger)).
		WithStatusSubresource(&api.PodDebugger{}).
		WithObjects(debugger, pod("a", time.Hour, corev1.PodRunning, web)).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				if sub == "ephemeralcontainers" {
					return apierrors.NewForbidden(corev1.Resource("pods"), obj.GetName(), errors.New("violates PodSecurity"))
				}
				return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			},
		}).Build()
	r := &Reconciler{Client: c, Recorder: record.NewFakeRecorder(100)}
	_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "shell"}})
	if err == nil {
		t.Error("a refusal returns an error, so that the work queue retries with its backoff")
	}
	var d api.PodDebugger
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "shell"}, &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Status.FailedPods) != 1 || d.Status.FailedPods[0].Pod != "a" || d.Status.FailedPods[0].UID != "uid-a" ||
		d.Status.FailedPods[0].Reason != "Rejected" || d.Status.DebuggedCount != 0 || d.Status.MatchedPods != 1 {
		t.Errorf("status %+v", d.Status)
	}
	got := recordedevents.Drain(r.Recorder)
	if len(got) != 2 || !strings.HasPrefix(got[0], "Warning DebugContainerRefused PodDebugger shell could not add") ||
		!strings.HasPrefix(got[1], "Warning InjectionFailed pod a refused") {
		t.Errorf("events %v", got)
	}
}
