package api

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// copier is a pointer to one of the custom resource types, with its hand-written DeepCopyInto.
type copier[T any] interface {
	*T
	DeepCopyInto(out *T)
}

// deepCopy returns a deep copy of in.
func deepCopy[T any, P copier[T]](in P) P {
	out := P(new(T))
	in.DeepCopyInto(out)
	return out
}

// deepCopyItems returns a deep copy of a list's items.
func deepCopyItems[T any, P copier[T]](items []T) []T {
	out := make([]T, len(items))
	for i := range items {
		P(&items[i]).DeepCopyInto(&out[i])
	}
	return out
}

// register adds a custom resource type and its list type to scheme under gv.
func register(scheme *runtime.Scheme, gv schema.GroupVersion, object, list runtime.Object) error {
	scheme.AddKnownTypes(gv, object, list)
	metav1.AddToGroupVersion(scheme, gv)
	return nil
}
