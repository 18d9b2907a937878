package configmapsync

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"opsuite.dev/bench/reference/api"
	"opsuite.dev/bench/reference/internal/app"
	"opsuite.dev/bench/reference/internal/recordedevents"
)

var syncKey = types.NamespacedName{Namespace: "platform", Name: "ca"}

func namespace(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func source(allowed *string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "bundle", Namespace: "platform",
			Labels:      map[string]string{"team": "platform", "app.kubernetes.io/part-of": "ca"},
			Annotations: map[string]string{"note": "x"}},
		Data: map[string]string{"ca.crt": "v1"},
	}
	if allowed != nil {
		cm.Annotations[AllowedNamespacesAnnotation] = *allowed
	}
	return cm
}

func newSync() *api.ConfigMapSync {
	return &api.ConfigMapSync{
		ObjectMeta: metav1.ObjectMeta{Name: "ca", Namespace: "platform", UID: "sync-uid", Generation: 1},
		Spec: api.ConfigMapSyncSpec{
			ConfigMapName:         "bundle",
			DestinationNamespaces: []string{"team-a", "platform", "missing"},
			NamespaceSelector:     &metav1.LabelSelector{MatchLabels: map[string]string{"ca": "true"}},
			CopyLabels:            []string{"app.kubernetes.io/*"},
		},
	}
}

func setup(t *testing.T, sync *api.ConfigMapSync, objs ...client.Object) (*Reconciler, client.Client) {
	t.Helper()
	builder := fake.NewClientBuilder().WithScheme(app.NewScheme(api.AddConfigMapSync)).
		WithStatusSubresource(&api.ConfigMapSync{}).
		WithObjects(namespace("platform", map[string]string{"ca": "true"}), namespace("team-a", nil),
			namespace("team-b", map[string]string{"ca": "true"}), namespace("other", nil)).
		WithObjects(objs...)
	if sync != nil {
		builder = builder.WithObjects(sync)
	}
	for name, extract := range Indexes {
		builder = builder.WithIndex(&api.ConfigMapSync{}, name, extract)
	}
	builder = builder.WithIndex(&corev1.ConfigMap{}, OwnerIndex, OwnerOf)
	c := builder.Build()
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	return &Reconciler{Client: c, Now: func() time.Time { return now }, Recorder: record.NewFakeRecorder(100)}, c
}

func reconcileOnce(t *testing.T, r *Reconciler) {
	t.Helper()
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: syncKey}); err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, c client.Client, ns string) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "bundle"}, cm); err != nil {
		return nil
	}
	return cm
}

func syncStatus(t *testing.T, c client.Client) api.ConfigMapSyncStatus {
	t.Helper()
	var s api.ConfigMapSync
	if err := c.Get(context.Background(), syncKey, &s); err != nil {
		t.Fatal(err)
	}
	return s.Status
}

func str(s string) *string { return &s }

func TestCopiesIntoListedAndSelectedNamespacesNeverTheSource(t *testing.T) {
	r, c := setup(t, newSync(), source(str("team-*")))
	reconcileOnce(t, r)
	for _, ns := range []string{"team-a", "team-b"} {
		cm := get(t, c, ns)
		if cm == nil {
			t.Fatalf("no copy in %s", ns)
		}
		if cm.Data["ca.crt"] != "v1" || cm.Labels[OwnerUIDLabel] != "sync-uid" ||
			cm.Labels["app.kubernetes.io/part-of"] != "ca" || cm.Labels["team"] != "" || cm.Annotations["note"] != "" ||
			cm.Annotations[OwnerAnnotation] != "platform/ca/sync-uid" || cm.Annotations[SourceAnnotation] != "platform/bundle" ||
			cm.Annotations[DeletionPolicyAnnotation] != "Delete" || cm.Annotations[AllowedNamespacesAnnotation] != "" {
			t.Errorf("copy in %s: %+v", ns, cm.ObjectMeta)
		}
	}
	if get(t, c, "other") != nil {
		t.Error("copied into an unselected namespace")
	}
	st := syncStatus(t, c)
	if st.Source != "platform/bundle" || st.TargetNamespaces != 4 || st.SyncedNamespaces != 2 || st.FailedNamespaces != 2 ||
		len(st.FailedTargets) != 2 || st.FailedTargets[0].Reason != NamespaceMissing ||
		st.FailedTargets[1].Namespace != "platform" || st.FailedTargets[1].Reason != SourceNamespace || st.LastSyncTime == nil ||
		st.ObservedGeneration != 1 {
		t.Errorf("status %+v", st)
	}
	got := recordedevents.Drain(r.Recorder)
	if len(got) != 3 || got[0] != "Normal Synced wrote 2 copies of platform/bundle" ||
		!strings.HasPrefix(got[1], "Warning "+NamespaceMissing+" ") || !strings.HasPrefix(got[2], "Warning "+SourceNamespace+" platform: ") {
		t.Errorf("events %v", got)
	}
	reconcileOnce(t, r)
	if got := recordedevents.Drain(r.Recorder); len(got) != 0 {
		t.Errorf("events after a pass with nothing new: %v", got)
	}
}

func TestDriftIsRepairedAndCoWritersKept(t *testing.T) {
	r, c := setup(t, newSync(), source(str("*")))
	reconcileOnce(t, r)
	copyA := get(t, c, "team-a")
	copyA.Data["ca.crt"] = "tampered"
	copyA.Labels["webhook.example.com/injected"] = "yes"
	if err := c.Update(context.Background(), copyA); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(context.Background(), get(t, c, "team-b")); err != nil {
		t.Fatal(err)
	}
	reconcileOnce(t, r)
	if cm := get(t, c, "team-a"); cm.Data["ca.crt"] != "v1" || cm.Labels["webhook.example.com/injected"] != "yes" {
		t.Errorf("team-a after repair: %v %v", cm.Data, cm.Labels)
	}
	if get(t, c, "team-b") == nil {
		t.Error("the deleted copy is not restored")
	}
	before := get(t, c, "team-a").ResourceVersion
	reconcileOnce(t, r)
	if get(t, c, "team-a").ResourceVersion != before {
		t.Error("a copy in sync was written")
	}
}

func TestConsentNarrowedDeletesTheCopiesNoLongerAllowed(t *testing.T) {
	src := source(str("*"))
	r, c := setup(t, newSync(), src)
	reconcileOnce(t, r)
	src = &corev1.ConfigMap{}
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: "platform", Name: "bundle"}, src); err != nil {
		t.Fatal(err)
	}
	src.Annotations[AllowedNamespacesAnnotation] = "team-b"
	if err := c.Update(context.Background(), src); err != nil {
		t.Fatal(err)
	}
	reconcileOnce(t, r)
	if get(t, c, "team-a") != nil {
		t.Error("the copy where consent was withdrawn is kept")
	}
	if get(t, c, "team-b") == nil {
		t.Error("the allowed copy is gone")
	}
	st := syncStatus(t, c)
	reasons := map[string]string{}
	for _, f := range st.FailedTargets {
		reasons[f.Namespace] = f.Reason
	}
	if reasons["team-a"] != NotAllowedBySource || st.SyncedNamespaces != 1 {
		t.Errorf("status %+v", st)
	}
}

func TestNoConsentCopiesNothingAndKeepsExistingCopies(t *testing.T) {
	src := source(str("*"))
	r, c := setup(t, newSync(), src)
	reconcileOnce(t, r)
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: "platform", Name: "bundle"}, src); err != nil {
		t.Fatal(err)
	}
	delete(src.Annotations, AllowedNamespacesAnnotation)
	src.Data["ca.crt"] = "v2"
	if err := c.Update(context.Background(), src); err != nil {
		t.Fatal(err)
	}
	reconcileOnce(t, r)
	for _, ns := range []string{"team-a", "team-b"} {
		if cm := get(t, c, ns); cm == nil || cm.Data["ca.crt"] != "v1" {
			t.Errorf("copy in %s: %v, want kept unchanged", ns, cm)
		}
	}

	fresh, c2 := setup(t, newSync(), source(nil))
	reconcileOnce(t, fresh)
	if get(t, c2, "team-a") != nil || get(t, c2, "team-b") != nil {
		t.Error("copied without consent")
	}
}

func TestConflictsSkipOrOverwriteButNeverAnotherSyncsCopy(t *testing.T) {
	unmanaged := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "bundle", Namespace: "team-a"}, Data: map[string]string{"mine": "1"}}
	foreign := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "bundle", Namespace: "team-b",
		Labels:      map[string]string{OwnerUIDLabel: "other-uid"},
		Annotations: map[string]string{OwnerAnnotation: "platform/other/other-uid", SourceAnnotation: "platform/bundle"}}}
	other := &api.ConfigMapSync{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "platform", UID: "other-uid"},
		Spec: api.ConfigMapSyncSpec{ConfigMapName: "bundle", DestinationNamespaces: []string{"team-b"}}}
	r, c := setup(t, newSync(), source(str("*")), unmanaged, foreign, other)
	reconcileOnce(t, r)
	if cm := get(t, c, "team-a"); cm.Data["mine"] != "1" || cm.Labels[OwnerUIDLabel] != "" {
		t.Errorf("Skip touched the unmanaged ConfigMap: %+v", cm)
	}
	if cm := get(t, c, "team-b"); cm.Labels[OwnerUIDLabel] != "other-uid" {
		t.Error("took over another sync's copy")
	}
	if st := syncStatus(t, c); st.FailedNamespaces != 4 || st.SyncedNamespaces != 0 {
		t.Errorf("status %+v", st)
	}

	sync := newSync()
	sync.Spec.ConflictPolicy = "Overwrite"
	r, c = setup(t, sync, source(str("*")), unmanaged.DeepCopy(), foreign.DeepCopy(), other.DeepCopy())
	reconcileOnce(t, r)
	if cm := get(t, c, "team-a"); cm.Data["ca.crt"] != "v1" || cm.Labels[OwnerUIDLabel] != "sync-uid" {
		t.Errorf("Overwrite did not take over: %+v", cm)
	}
	if cm := get(t, c, "team-b"); cm.Labels[OwnerUIDLabel] != "other-uid" {
		t.Error("Overwrite took over another sync's copy")
	}
}

func TestCopiesOfAGoneSyncEndAsTheirDeletionPolicySays(t *testing.T) {
	for _, policy := range []string{"Delete", "Orphan"} {
		sync := newSync()
		sync.Spec.DeletionPolicy = policy
		r, c := setup(t, sync, source(str("*")))
		reconcileOnce(t, r)
		if err := c.Delete(context.Background(), sync); err != nil {
			t.Fatal(err)
		}
		reconcileOnce(t, r)
		for _, ns := range []string{"team-a", "team-b"} {
			cm := get(t, c, ns)
			switch {
			case policy == "Delete" && cm != nil:
				t.Errorf("Delete: copy in %s kept", ns)
			case policy == "Orphan" && (cm == nil || cm.Labels[OwnerUIDLabel] != "" || cm.Annotations[OwnerAnnotation] != "" || cm.Data["ca.crt"] != "v1"):
				t.Errorf("Orphan: copy in %s: %v", ns, cm)
			}
		}
		if get(t, c, "platform") == nil {
			t.Errorf("%s: the source is gone", policy)
		}
	}
}

func TestSourceGoneKeepsTheCopies(t *testing.T) {
	src := source(str("*"))
	r, c := setup(t, newSync(), src)
	reconcileOnce(t, r)
	if err := c.Delete(context.Background(), src); err != nil {
		t.Fatal(err)
	}
	reconcileOnce(t, r)
	if get(t, c, "team-a") == nil || get(t, c, "team-b") == nil {
		t.Error("copies deleted with the source")
	}
	if st := syncStatus(t, c); st.SyncedNamespaces != 2 {
		t.Errorf("status %+v", st)
	}
}

func TestAConfigMapMapsToTheSyncsOfItsNameAndItsOwner(t *testing.T) {
	r, _ := setup(t, newSync())
	got := r.syncsForConfigMap(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "bundle", Namespace: "x",
		Annotations: map[string]string{OwnerAnnotation: "gone/old/uid"}}})
	if len(got) != 2 || got[0].NamespacedName != syncKey || got[1].Namespace != "gone" || got[1].Name != "old" {
		t.Errorf("got %v", got)
	}
}
