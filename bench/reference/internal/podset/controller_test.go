package podset

import (
	"context"
	"slices"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"opsuite.dev/bench/reference/api"
	"opsuite.dev/bench/reference/internal/app"
	"opsuite.dev/bench/reference/internal/recordedevents"
)

var key = types.NamespacedName{Namespace: "ns", Name: "web"}

func newPodSet(replicas int32) *api.PodSet {
	return &api.PodSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "ps-uid", Generation: 3},
		Spec: api.PodSetSpec{Replicas: &replicas, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
		}},
	}
}

func setup(t *testing.T, podSet *api.PodSet, objs ...client.Object) (*Reconciler, client.Client, *runtime.Scheme) {
	t.Helper()
	scheme := app.NewScheme(api.AddPodSet)
	c := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&api.PodSet{}).
		WithObjects(append(objs, podSet)...).Build()
	return &Reconciler{Client: c, Scheme: scheme, Recorder: record.NewFakeRecorder(100)}, c, scheme
}

func reconcileOnce(t *testing.T, r *Reconciler) ctrl.Result {
	t.Helper()
	result, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key})
	if err != nil {
		t.Fatal(err)
	}
	return result
}

func pods(t *testing.T, c client.Client) []corev1.Pod {
	t.Helper()
	var list corev1.PodList
	if err := c.List(context.Background(), &list, client.InNamespace("ns")); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func status(t *testing.T, c client.Client) api.PodSetStatus {
	t.Helper()
	var ps api.PodSet
	if err := c.Get(context.Background(), key, &ps); err != nil {
		t.Fatal(err)
	}
	return ps.Status
}

// ownedPod is a pod of the PodSet, ready since readyFor ago when readyFor >= 0.
func ownedPod(t *testing.T, scheme *runtime.Scheme, podSet *api.PodSet, name string, age, readyFor time.Duration) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name),
			Labels:            map[string]string{"app": "web", api.PodSetNameLabel: "web"},
			CreationTimestamp: metav1.NewTime(time.Now().Add(-age).Truncate(time.Second))},
		Spec:   corev1.PodSpec{NodeName: "node", Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	if readyFor >= 0 {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(time.Now().Add(-readyFor))}}
	}
	if err := controllerutil.SetControllerReference(podSet, p, scheme); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestScaleUpCreatesOwnedLabelledPodsThenCountsThem(t *testing.T) {
	r, c, _ := setup(t, newPodSet(3))
	reconcileOnce(t, r)
	created := pods(t, c)
	if len(created) != 3 {
		t.Fatalf("%d pods, want 3", len(created))
	}
	for _, p := range created {
		ref := metav1.GetControllerOf(&p)
		if ref == nil || ref.UID != "ps-uid" || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
			t.Errorf("pod %s: controller %+v", p.Name, ref)
		}
		if p.Labels["app"] != "web" || p.Labels[api.PodSetNameLabel] != "web" || p.Spec.Containers[0].Image != "nginx" {
			t.Errorf("pod %s: labels %v", p.Name, p.Labels)
		}
	}
	var want []string
	for _, p := range created {
		want = append(want, "Normal SuccessfulCreate Created pod: "+p.Name)
	}
	sort.Strings(want)
	if got := recordedevents.Drain(r.Recorder); !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
	reconcileOnce(t, r)
	if n := len(pods(t, c)); n != 3 {
		t.Errorf("%d pods after a second pass, want 3", n)
	}
	if got := recordedevents.Drain(r.Recorder); len(got) != 0 {
		t.Errorf("events after a pass with nothing to do: %v", got)
	}
	wantStatus := api.PodSetStatus{Replicas: 3, Selector: "apps.opsuite.dev/podset=web", ObservedGeneration: 3}
	if got := status(t, c); got != wantStatus {
		t.Errorf("status %+v, want %+v", got, wantStatus)
	}
}

func TestScaleDownDeletesUnreadyAndNewestFirst(t *testing.T) {
	podSet := newPodSet(2)
	r, c, scheme := setup(t, podSet)
	for _, p := range []*corev1.Pod{
		ownedPod(t, scheme, podSet, "old-ready", time.Hour, time.Hour),
		ownedPod(t, scheme, podSet, "new-ready", time.Minute, time.Minute),
		ownedPod(t, scheme, podSet, "unready", time.Hour, -1),
		ownedPod(t, scheme, podSet, "newest-ready", time.Second, time.Second),
	} {
		if err := c.Create(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}
	reconcileOnce(t, r)
	var left []string
	for _, p := range pods(t, c) {
		left = append(left, p.Name)
	}
	if len(left) != 2 || left[0] != "new-ready" || left[1] != "old-ready" {
		t.Errorf("left %v, want [new-ready old-ready]", left)
	}
	want := []string{"Normal SuccessfulDelete Deleted pod: newest-ready", "Normal SuccessfulDelete Deleted pod: unready"}
	if got := recordedevents.Drain(r.Recorder); !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
	reconcileOnce(t, r)
	if got := status(t, c); got.Replicas != 2 || got.ReadyReplicas != 2 || got.AvailableReplicas != 2 {
		t.Errorf("status %+v", got)
	}
}

func TestPodsOfOthersAreNeitherCountedNorDeleted(t *testing.T) {
	podSet := newPodSet(0)
	stranger := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "stranger", Namespace: "ns",
		Labels: map[string]string{api.PodSetNameLabel: "web"}}}
	r, c, _ := setup(t, podSet, stranger)
	reconcileOnce(t, r)
	if n := len(pods(t, c)); n != 1 {
		t.Errorf("%d pods, want the stranger alone", n)
	}
	if got := status(t, c); got.Replicas != 0 {
		t.Errorf("status %+v", got)
	}
}

func TestMinReadySecondsDelaysAvailability(t *testing.T) {
	podSet := newPodSet(2)
	podSet.Spec.MinReadySeconds = 60
	r, c, scheme := setup(t, podSet)
	for _, p := range []*corev1.Pod{
		ownedPod(t, scheme, podSet, "long-ready", time.Hour, time.Hour),
		ownedPod(t, scheme, podSet, "just-ready", time.Hour, 10*time.Second),
	} {
		if err := c.Create(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}
	result := reconcileOnce(t, r)
	got := status(t, c)
	if got.ReadyReplicas != 2 || got.AvailableReplicas != 1 {
		t.Errorf("status %+v", got)
	}
	if result.RequeueAfter <= 40*time.Second || result.RequeueAfter > 50*time.Second {
		t.Errorf("requeue after %v, want about 50s", result.RequeueAfter)
	}
}

func TestNoScalingUntilTheCacheShowsTheLastStep(t *testing.T) {
	r := &Reconciler{}
	exp := r.expect(key)
	exp.created.Insert("web-abcde")
	if r.satisfied(key, nil) {
		t.Error("satisfied before the created pod is seen")
	}
	if !r.satisfied(key, []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "web-abcde"}}}) {
		t.Error("not satisfied once the created pod is seen")
	}
	exp = r.expect(key)
	exp.deleted.Insert("uid-1")
	if r.satisfied(key, []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "uid-1"}}}) {
		t.Error("satisfied while the deleted pod is still there")
	}
	exp.since = time.Now().Add(-ExpectationsTimeout - time.Second)
	if !r.satisfied(key, []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "uid-1"}}}) {
		t.Error("not satisfied after the timeout")
	}
}
