package configmapsync

import (
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"opsuite.dev/bench/reference/api"
)

// The marks every copy carries, the same as opsuite's (configmapsync_operator/models.py).
const (
	OwnerUIDLabel            = "sync.opsuite.dev/owner-uid"
	OwnerAnnotation          = "sync.opsuite.dev/owner"
	SourceAnnotation         = "sync.opsuite.dev/source"
	DeletionPolicyAnnotation = "sync.opsuite.dev/deletion-policy"
	bookkeepingPrefix        = "sync.opsuite.dev/"
	lastApplied              = "kubectl.kubernetes.io/last-applied-configuration"
)

// copyable tells whether a label or annotation key of the source goes onto copies.
func copyable(key string, patterns []string) bool {
	return !strings.HasPrefix(key, bookkeepingPrefix) && key != lastApplied && Matches(patterns, key)
}

func selected(from map[string]string, patterns []string) map[string]string {
	out := map[string]string{}
	for key, value := range from {
		if copyable(key, patterns) {
			out[key] = value
		}
	}
	return out
}

func deletionPolicy(sync *api.ConfigMapSync) string {
	if sync.Spec.DeletionPolicy == "" {
		return "Delete"
	}
	return sync.Spec.DeletionPolicy
}

// Render is the copy of source that sync keeps in namespace.
func Render(sync *api.ConfigMapSync, source *corev1.ConfigMap, namespace string) *corev1.ConfigMap {
	labels := selected(source.Labels, sync.Spec.CopyLabels)
	labels[OwnerUIDLabel] = string(sync.UID)
	annotations := selected(source.Annotations, sync.Spec.CopyAnnotations)
	annotations[OwnerAnnotation] = sync.Namespace + "/" + sync.Name + "/" + string(sync.UID)
	annotations[SourceAnnotation] = source.Namespace + "/" + source.Name
	annotations[DeletionPolicyAnnotation] = deletionPolicy(sync)
	copy := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: source.Name, Namespace: namespace, Labels: labels, Annotations: annotations,
		},
		Data:       maps.Clone(source.Data),
		BinaryData: maps.Clone(source.BinaryData),
	}
	if source.Immutable != nil && *source.Immutable {
		immutable := true
		copy.Immutable = &immutable
	}
	return copy
}

// ownedKeys are the keys of a copy's labels or annotations the operator owns: its marks and those
// the allowlist matches.
func ownedKeys(current map[string]string, patterns []string) []string {
	var keys []string
	for key := range current {
		if strings.HasPrefix(key, bookkeepingPrefix) || copyable(key, patterns) {
			keys = append(keys, key)
		}
	}
	return keys
}

// merged is current with its owned keys replaced by desired's (other keys, a co-writer's,
// are kept).
func merged(current, desired map[string]string, patterns []string) map[string]string {
	out := maps.Clone(current)
	if out == nil {
		out = map[string]string{}
	}
	for _, key := range ownedKeys(current, patterns) {
		delete(out, key)
	}
	maps.Copy(out, desired)
	return out
}

func isImmutable(cm *corev1.ConfigMap) bool {
	return cm.Immutable != nil && *cm.Immutable
}

func sameContent(a, b *corev1.ConfigMap) bool {
	return maps.Equal(a.Data, b.Data) && maps.EqualFunc(a.BinaryData, b.BinaryData,
		func(x, y []byte) bool { return string(x) == string(y) })
}

// Updated is current brought to desired in the keys the operator owns; same is true when
// nothing changes.
func Updated(current, desired *corev1.ConfigMap, sync *api.ConfigMapSync) (updated *corev1.ConfigMap, same bool) {
	updated = current.DeepCopy()
	updated.Data = desired.Data
	updated.BinaryData = desired.BinaryData
	updated.Immutable = desired.Immutable
	updated.Labels = merged(current.Labels, desired.Labels, sync.Spec.CopyLabels)
	updated.Annotations = merged(current.Annotations, desired.Annotations, sync.Spec.CopyAnnotations)
	same = sameContent(current, desired) && isImmutable(current) == isImmutable(desired) &&
		maps.Equal(current.Labels, updated.Labels) && maps.Equal(current.Annotations, updated.Annotations)
	return updated, same
}

// released is a copy without the operator's marks (deletionPolicy Orphan).
func released(cm *corev1.ConfigMap) *corev1.ConfigMap {
	out := cm.DeepCopy()
	delete(out.Labels, OwnerUIDLabel)
	for _, key := range []string{OwnerAnnotation, SourceAnnotation, DeletionPolicyAnnotation} {
		delete(out.Annotations, key)
	}
	return out
}
