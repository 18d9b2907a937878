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
type ConfigMapSync = Object[ConfigMapSyncSpec, ConfigMapSyncStatus]

// ConfigMapSyncList is a list of ConfigMapSyncs.
type ConfigMapSyncList = List[ConfigMapSyncSpec, ConfigMapSyncStatus]

func (s ConfigMapSyncSpec) deepCopy() ConfigMapSyncSpec {
	s.DestinationNamespaces = append([]string(nil), s.DestinationNamespaces...)
	s.NamespaceSelector = s.NamespaceSelector.DeepCopy()
	s.CopyLabels = append([]string(nil), s.CopyLabels...)
	s.CopyAnnotations = append([]string(nil), s.CopyAnnotations...)
	return s
}

func (s ConfigMapSyncStatus) deepCopy() ConfigMapSyncStatus {
	s.FailedTargets = append([]FailedTarget(nil), s.FailedTargets...)
	s.LastSyncTime = s.LastSyncTime.DeepCopy()
	return s
}

// AddConfigMapSync registers ConfigMapSync and ConfigMapSyncList.
func AddConfigMapSync(scheme *runtime.Scheme) error {
	return register[ConfigMapSyncSpec, ConfigMapSyncStatus](scheme, ConfigMapSyncGroupVersion, "ConfigMapSync")
}
