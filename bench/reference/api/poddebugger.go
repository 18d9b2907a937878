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
type PodDebugger = Object[PodDebuggerSpec, PodDebuggerStatus]

// PodDebuggerList is a list of PodDebuggers.
type PodDebuggerList = List[PodDebuggerSpec, PodDebuggerStatus]

func (s PodDebuggerSpec) deepCopy() PodDebuggerSpec {
	s.Selector = *s.Selector.DeepCopy()
	s.Command = append([]string(nil), s.Command...)
	s.Args = append([]string(nil), s.Args...)
	s.Env = append([]EnvVar(nil), s.Env...)
	if s.RunAsUser != nil {
		uid := *s.RunAsUser
		s.RunAsUser = &uid
	}
	if s.MaxPods != nil {
		maxPods := *s.MaxPods
		s.MaxPods = &maxPods
	}
	return s
}

func (s PodDebuggerStatus) deepCopy() PodDebuggerStatus {
	s.FailedPods = append([]FailedPod(nil), s.FailedPods...)
	return s
}

// AddPodDebugger registers PodDebugger and PodDebuggerList.
func AddPodDebugger(scheme *runtime.Scheme) error {
	return register[PodDebuggerSpec, PodDebuggerStatus](scheme, PodDebuggerGroupVersion, "PodDebugger")
}
