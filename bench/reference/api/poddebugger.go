package api

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// PodDebuggerGroupVersion is the API group of charts/pod-debugger-operator/crds.
var PodDebuggerGroupVersion = schema.GroupVersion{Group: "debug.opsuite.dev", Version: "v1alpha1"}

// EnvVar is a name and a value, as the CRD's env items.
type EnvVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// PodDebuggerSpec holds every spec field of the CRD.
type PodDebuggerSpec struct {
	Selector        metav1.LabelSelector `json:"selector"`
	Image           string               `json:"image"`
	Command         []string             `json:"command,omitempty"`
	Args            []string             `json:"args,omitempty"`
	Env             []EnvVar             `json:"env,omitempty"`
	Stdin           bool                 `json:"stdin,omitempty"`
	TTY             bool                 `json:"tty,omitempty"`
	TargetContainer string               `json:"targetContainer,omitempty"`
	Profile         string               `json:"profile,omitempty"`
	RunAsUser       *int64               `json:"runAsUser,omitempty"`
	MaxPods         *int32               `json:"maxPods,omitempty"`
}

// FailedPod is a pod whose injection the API server refused.
type FailedPod struct {
	Pod       string `json:"pod"`
	UID       string `json:"uid"`
	Container string `json:"container"`
	Reason    string `json:"reason"`
	Message   string `json:"message"`
}

// PodDebuggerStatus holds the counts the reference writes (no debuggedPods list, no
// conditions).
type PodDebuggerStatus struct {
	MatchedPods        int32       `json:"matchedPods"`
	DebuggedCount      int32       `json:"debuggedCount"`
	SkippedPods        int32       `json:"skippedPods"`
	DebuggedPodsTotal  int32       `json:"debuggedPodsTotal"`
	FailedPods         []FailedPod `json:"failedPods,omitempty"`
	ObservedGeneration int64       `json:"observedGeneration,omitempty"`
}

// PodDebugger is a poddebuggers.debug.opsuite.dev object.
type PodDebugger struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              PodDebuggerSpec   `json:"spec"`
	Status            PodDebuggerStatus `json:"status,omitempty"`
}

// PodDebuggerList is a list of PodDebuggers.
type PodDebuggerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PodDebugger `json:"items"`
}

// DeepCopyInto copies d into out.
func (d *PodDebugger) DeepCopyInto(out *PodDebugger) {
	*out = *d
	d.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	d.Spec.Selector.DeepCopyInto(&out.Spec.Selector)
	out.Spec.Command = append([]string(nil), d.Spec.Command...)
	out.Spec.Args = append([]string(nil), d.Spec.Args...)
	out.Spec.Env = append([]EnvVar(nil), d.Spec.Env...)
	if d.Spec.RunAsUser != nil {
		uid := *d.Spec.RunAsUser
		out.Spec.RunAsUser = &uid
	}
	if d.Spec.MaxPods != nil {
		maxPods := *d.Spec.MaxPods
		out.Spec.MaxPods = &maxPods
	}
	out.Status.FailedPods = append([]FailedPod(nil), d.Status.FailedPods...)
}

// DeepCopy returns a deep copy of d.
func (d *PodDebugger) DeepCopy() *PodDebugger { return deepCopy(d) }

// DeepCopyObject implements runtime.Object.
func (d *PodDebugger) DeepCopyObject() runtime.Object { return d.DeepCopy() }

// DeepCopyObject implements runtime.Object.
func (l *PodDebuggerList) DeepCopyObject() runtime.Object {
	out := &PodDebuggerList{TypeMeta: l.TypeMeta, Items: deepCopyItems(l.Items)}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	return out
}

// AddPodDebugger registers PodDebugger and PodDebuggerList.
func AddPodDebugger(scheme *runtime.Scheme) error {
	return register(scheme, PodDebuggerGroupVersion, &PodDebugger{}, &PodDebuggerList{})
}
