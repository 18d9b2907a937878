package api

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// PodSetGroupVersion is the API group of charts/podset-operator/crds.
var PodSetGroupVersion = schema.GroupVersion{Group: "apps.opsuite.dev", Version: "v1alpha1"}

// PodSetNameLabel labels the pods of a PodSet without a selector, as opsuite's operator does.
const PodSetNameLabel = "apps.opsuite.dev/podset"

// PodSetSpec holds the spec fields the reference reads (not updateStrategy or
// progressDeadlineSeconds: it does not roll out templates).
type PodSetSpec struct {
	Replicas        *int32                 `json:"replicas,omitempty"`
	Selector        *metav1.LabelSelector  `json:"selector,omitempty"`
	Template        corev1.PodTemplateSpec `json:"template"`
	MinReadySeconds int32                  `json:"minReadySeconds,omitempty"`
}

// PodSetStatus holds the counts the reference writes, and the selector the scale subresource
// reports (.status.selector).
type PodSetStatus struct {
	Replicas           int32  `json:"replicas"`
	ReadyReplicas      int32  `json:"readyReplicas"`
	AvailableReplicas  int32  `json:"availableReplicas"`
	Selector           string `json:"selector,omitempty"`
	ObservedGeneration int64  `json:"observedGeneration,omitempty"`
}

// PodSet is a podsets.apps.opsuite.dev object.
type PodSet = Object[PodSetSpec, PodSetStatus]

// PodSetList is a list of PodSets.
type PodSetList = List[PodSetSpec, PodSetStatus]

func (s PodSetSpec) deepCopy() PodSetSpec {
	if s.Replicas != nil {
		replicas := *s.Replicas
		s.Replicas = &replicas
	}
	s.Selector = s.Selector.DeepCopy()
	s.Template = *s.Template.DeepCopy()
	return s
}

func (s PodSetStatus) deepCopy() PodSetStatus { return s }

// AddPodSet registers PodSet and PodSetList.
func AddPodSet(scheme *runtime.Scheme) error {
	return register[PodSetSpec, PodSetStatus](scheme, PodSetGroupVersion, "PodSet")
}
