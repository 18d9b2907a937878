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
type PodSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              PodSetSpec   `json:"spec"`
	Status            PodSetStatus `json:"status,omitempty"`
}

// PodSetList is a list of PodSets.
type PodSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PodSet `json:"items"`
}

// DeepCopyInto copies p into out.
func (p *PodSet) DeepCopyInto(out *PodSet) {
	*out = *p
	p.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if p.Spec.Replicas != nil {
		replicas := *p.Spec.Replicas
		out.Spec.Replicas = &replicas
	}
	out.Spec.Selector = p.Spec.Selector.DeepCopy()
	p.Spec.Template.DeepCopyInto(&out.Spec.Template)
}

// DeepCopy returns a deep copy of p.
func (p *PodSet) DeepCopy() *PodSet { return deepCopy(p) }

// DeepCopyObject implements runtime.Object.
func (p *PodSet) DeepCopyObject() runtime.Object { return p.DeepCopy() }

// DeepCopyObject implements runtime.Object.
func (l *PodSetList) DeepCopyObject() runtime.Object {
	out := &PodSetList{TypeMeta: l.TypeMeta, Items: deepCopyItems(l.Items)}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	return out
}

// AddPodSet registers PodSet and PodSetList.
func AddPodSet(scheme *runtime.Scheme) error {
	return register(scheme, PodSetGroupVersion, &PodSet{}, &PodSetList{})
}
