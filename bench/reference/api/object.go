package api

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// part is a spec or status type, with its hand-written deep copy.
type part[T any] interface {
	deepCopy() T
}

// Object is a custom resource of spec S and status T; each resource's file names its own
// (type PodSet = Object[PodSetSpec, PodSetStatus]).
type Object[S part[S], T part[T]] struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              S `json:"spec"`
	Status            T `json:"status,omitempty"`
}

// DeepCopyInto copies o into out.
func (o *Object[S, T]) DeepCopyInto(out *Object[S, T]) {
	*out = *o
	o.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec = o.Spec.deepCopy()
	out.Status = o.Status.deepCopy()
}

// DeepCopy returns a deep copy of o.
func (o *Object[S, T]) DeepCopy() *Object[S, T] {
	out := new(Object[S, T])
	o.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (o *Object[S, T]) DeepCopyObject() runtime.Object { return o.DeepCopy() }

// List is a list of Objects of spec S and status T.
type List[S part[S], T part[T]] struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Object[S, T] `json:"items"`
}

// DeepCopyObject implements runtime.Object.
func (l *List[S, T]) DeepCopyObject() runtime.Object {
	out := &List[S, T]{TypeMeta: l.TypeMeta, Items: make([]Object[S, T], len(l.Items))}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	for i := range l.Items {
		l.Items[i].DeepCopyInto(&out.Items[i])
	}
	return out
}

// register adds Object[S, T] as kind, and List[S, T] as kind + "List", to scheme under gv
// (by name: the generic types' own names are not the kinds).
func register[S part[S], T part[T]](scheme *runtime.Scheme, gv schema.GroupVersion, kind string) error {
	scheme.AddKnownTypeWithName(gv.WithKind(kind), &Object[S, T]{})
	scheme.AddKnownTypeWithName(gv.WithKind(kind+"List"), &List[S, T]{})
	metav1.AddToGroupVersion(scheme, gv)
	return nil
}
