package api

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ConfigMapSyncGroupVersion is the API group of charts/configmapsync-operator/crds.
var ConfigMapSyncGroupVersion = schema.GroupVersion{Group: "sync.opsuite.dev", Version: "v1alpha1"}

// ConfigMapSyncSpec holds every spec field of the CRD.
type ConfigMapSyncSpec struct {
	ConfigMapName         string                `json:"configMapName"`
	SourceNamespace       string                `json:"sourceNamespace,omitempty"`
	DestinationNamespaces []string              `json:"destinationNamespaces,omitempty"`
	NamespaceSelector     *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
	ConflictPolicy        string                `json:"conflictPolicy,omitempty"`
	DeletionPolicy        string                `json:"deletionPolicy,omitempty"`
	CopyLabels            []string              `json:"copyLabels,omitempty"`
	CopyAnnotations       []string              `json:"copyAnnotations,omitempty"`
}

// FailedTarget is a destination without a current copy.
type FailedTarget struct {
	Namespace string `json:"namespace"`
	Reason    string `json:"reason"`
	Message   string `json:"message"`
}

// ConfigMapSyncStatus holds the counts and failures the reference writes (no conditions).
type ConfigMapSyncStatus struct {
	Source             string         `json:"source,omitempty"`
	TargetNamespaces   int32          `json:"targetNamespaces"`
	SyncedNamespaces   int32          `json:"syncedNamespaces"`
	FailedNamespaces   int32          `json:"failedNamespaces"`
	FailedTargets      []FailedTarget `json:"failedTargets,omitempty"`
	LastSyncTime       *metav1.Time   `json:"lastSyncTime,omitempty"`
	ObservedGeneration int64          `json:"observedGeneration,omitempty"`
}

// ConfigMapSync is a configmapsyncs.sync.opsuite.dev object.
type ConfigMapSync struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ConfigMapSyncSpec   `json:"spec"`
	Status            ConfigMapSyncStatus `json:"status,omitempty"`
}

// ConfigMapSyncList is a list of ConfigMapSyncs.
type ConfigMapSyncList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ConfigMapSync `json:"items"`
}

// DeepCopyInto copies s into out.
func (s *ConfigMapSync) DeepCopyInto(out *ConfigMapSync) {
	*out = *s
	s.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec.DestinationNamespaces = append([]string(nil), s.Spec.DestinationNamespaces...)
	out.Spec.NamespaceSelector = s.Spec.NamespaceSelector.DeepCopy()
	out.Spec.CopyLabels = append([]string(nil), s.Spec.CopyLabels...)
	out.Spec.CopyAnnotations = append([]string(nil), s.Spec.CopyAnnotations...)
	out.Status.FailedTargets = append([]FailedTarget(nil), s.Status.FailedTargets...)
	out.Status.LastSyncTime = s.Status.LastSyncTime.DeepCopy()
}

// DeepCopy returns a deep copy of s.
func (s *ConfigMapSync) DeepCopy() *ConfigMapSync { return deepCopy(s) }

// DeepCopyObject implements runtime.Object.
func (s *ConfigMapSync) DeepCopyObject() runtime.Object { return s.DeepCopy() }

// DeepCopyObject implements runtime.Object.
func (l *ConfigMapSyncList) DeepCopyObject() runtime.Object {
	out := &ConfigMapSyncList{TypeMeta: l.TypeMeta, Items: deepCopyItems(l.Items)}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	return out
}

// AddConfigMapSync registers ConfigMapSync and ConfigMapSyncList.
func AddConfigMapSync(scheme *runtime.Scheme) error {
	return register(scheme, ConfigMapSyncGroupVersion, &ConfigMapSync{}, &ConfigMapSyncList{})
}
