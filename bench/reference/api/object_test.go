package api

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestRegisteredUnderTheirKinds(t *testing.T) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{AddPodSet, AddConfigMapSync, AddPodDebugger} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	for want, obj := range map[string]runtime.Object{
		"apps.opsuite.dev/v1alpha1, Kind=PodSet":            &PodSet{},
		"apps.opsuite.dev/v1alpha1, Kind=PodSetList":        &PodSetList{},
		"sync.opsuite.dev/v1alpha1, Kind=ConfigMapSync":     &ConfigMapSync{},
		"sync.opsuite.dev/v1alpha1, Kind=ConfigMapSyncList": &ConfigMapSyncList{},
		"debug.opsuite.dev/v1alpha1, Kind=PodDebugger":      &PodDebugger{},
		"debug.opsuite.dev/v1alpha1, Kind=PodDebuggerList":  &PodDebuggerList{},
	} {
		kinds, _, err := scheme.ObjectKinds(obj)
		if err != nil || len(kinds) != 1 || kinds[0].String() != want {
			t.Errorf("%T: kinds %v (%v), want %s", obj, kinds, err, want)
		}
	}
}

func TestDeepCopySharesNothing(t *testing.T) {
	now := metav1.Now()
	in := &ConfigMapSyncList{Items: []ConfigMapSync{{
		ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"k": "v"}},
		Spec: ConfigMapSyncSpec{
			DestinationNamespaces: []string{"d"},
			NamespaceSelector:     &metav1.LabelSelector{MatchLabels: map[string]string{"k": "v"}},
		},
		Status: ConfigMapSyncStatus{FailedTargets: []FailedTarget{{Namespace: "d"}}, LastSyncTime: &now},
	}}}
	out := in.DeepCopyObject().(*ConfigMapSyncList)
	got := &out.Items[0]
	got.Labels["k"] = "changed"
	got.Spec.DestinationNamespaces[0] = "changed"
	got.Spec.NamespaceSelector.MatchLabels["k"] = "changed"
	got.Status.FailedTargets[0].Namespace = "changed"
	got.Status.LastSyncTime.Time = got.Status.LastSyncTime.Add(1)
	orig := in.Items[0]
	if orig.Labels["k"] != "v" || orig.Spec.DestinationNamespaces[0] != "d" ||
		orig.Spec.NamespaceSelector.MatchLabels["k"] != "v" ||
		orig.Status.FailedTargets[0].Namespace != "d" || !orig.Status.LastSyncTime.Equal(&now) {
		t.Errorf("the copy shares memory with the original: %+v", orig)
	}

	one := int32(1)
	debugger := &PodDebugger{Spec: PodDebuggerSpec{
		Selector: metav1.LabelSelector{MatchLabels: map[string]string{"k": "v"}},
		Command:  []string{"sleep"},
		MaxPods:  &one,
	}}
	copied := debugger.DeepCopy()
	copied.Spec.Selector.MatchLabels["k"] = "changed"
	copied.Spec.Command[0] = "changed"
	*copied.Spec.MaxPods = 2
	if debugger.Spec.Selector.MatchLabels["k"] != "v" || debugger.Spec.Command[0] != "sleep" ||
		*debugger.Spec.MaxPods != 1 {
		t.Errorf("the copy shares memory with the original: %+v", debugger.Spec)
	}
}
