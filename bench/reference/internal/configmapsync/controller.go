// Package configmapsync is the reference ConfigMapSync controller: copy a ConfigMap into the
// listed and selected namespaces its consent annotation allows, repair drift, and end the
// copies of a deleted ConfigMapSync.
package configmapsync

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"opsuite.dev/bench/reference/api"
	"opsuite.dev/bench/reference/internal/app"
)

// Failure reasons, opsuite's names.
const (
	SourceNotFound     = "SourceNotFound"
	NotAllowedBySource = "NotAllowedBySource"
	Conflict           = "Conflict"
	WriteFailed        = "WriteFailed"
	NamespaceMissing   = "NamespaceMissing"
	Terminating        = "Terminating"
	SourceNamespace    = "SourceNamespace"
	NotWatched         = "NamespaceNotWatched"
)

// MaxFailedTargets bounds status.failedTargets, as the CRD does.
const MaxFailedTargets = 20

// Index names of the ConfigMapSync cache.
const (
	configMapNameIndex = "spec.configMapName"
	sourceIndex        = "source"
)

// OwnerIndex indexes the ConfigMap cache by the owner-uid label, so that a sync's copies are
// found without a scan of every ConfigMap (the kubebuilder book indexes owned Jobs the same
// way).
const OwnerIndex = "ownerUID"

// OwnerOf is OwnerIndex's extractor.
func OwnerOf(obj client.Object) []string {
	if uid, ok := obj.GetLabels()[OwnerUIDLabel]; ok {
		return []string{uid}
	}
	return nil
}

// Reconciler reconciles ConfigMapSyncs.
type Reconciler struct {
	client.Client
	// Recorder posts opsuite's Events: Synced, CopiesDeleted, and a Warning per destination that
	// newly fails.
	Recorder record.EventRecorder
	// Namespace is the only namespace served (--namespace), empty for all.
	Namespace string
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// +kubebuilder:rbac:groups=sync.opsuite.dev,resources=configmapsyncs,verbs=get;list;watch
// +kubebuilder:rbac:groups=sync.opsuite.dev,resources=configmapsyncs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// failure is a destination without a current copy.
type failure = api.FailedTarget

// Reconcile brings every copy of one ConfigMapSync to its source, or ends the copies of a
// ConfigMapSync that is gone.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	sync := &api.ConfigMapSync{}
	if err := r.Get(ctx, req.NamespacedName, sync); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, r.collect(ctx, req.NamespacedName)
		}
		return ctrl.Result{}, err
	}
	if sync.DeletionTimestamp != nil {
		return ctrl.Result{}, nil // no finalizer: the copies are collected once it is gone
	}
	sourceNamespace := sourceNamespaceOf(sync)
	name := sync.Spec.ConfigMapName
	source, err := r.source(ctx, sourceNamespace, name)
	if err != nil {
		return ctrl.Result{}, err
	}
	targets, failures, err := r.targets(ctx, sync, sourceNamespace)
	if err != nil {
		return ctrl.Result{}, err
	}
	destinations := len(targets) + len(failures) // listed or selected: opsuite's targetNamespaces
	live, err := r.liveOwners(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	var patterns []string
	consent := false
	if source != nil {
		patterns, consent = AllowedNamespaces(source)
	}

	var tasks []func() error
	var written []string
	synced := 0
	wanted := sets.New[string]()
	for _, ns := range targets {
		allowed := consent && Matches(patterns, ns)
		if source != nil && !allowed {
			failures = append(failures, notAllowed(source, ns, consent))
			if !consent {
				wanted.Insert(ns) // no consent at all: the copy is kept as it is
			}
			continue
		}
		wanted.Insert(ns)
		occupant := &corev1.ConfigMap{}
		err := r.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, occupant)
		if apierrors.IsNotFound(err) {
			if source == nil {
				failures = append(failures, failure{Namespace: ns, Reason: SourceNotFound,
					Message: "ConfigMap " + sourceNamespace + "/" + name + " not found"})
				continue
			}
			desired := Render(sync, source, ns)
			tasks = append(tasks, func() error { return r.Create(ctx, desired) })
			written = append(written, ns)
			continue
		} else if err != nil {
			return ctrl.Result{}, err
		}
		owner := occupant.Labels[OwnerUIDLabel]
		switch {
		case occupant.DeletionTimestamp != nil:
			failures = append(failures, failure{Namespace: ns, Reason: Terminating,
				Message: "ConfigMap " + ns + "/" + name + " is being deleted; a copy follows"})
		case owner == string(sync.UID) && source == nil:
			synced++ // kept while the source is gone
		case owner == string(sync.UID):
			desired := Render(sync, source, ns)
			updated, same := Updated(occupant, desired, sync)
			switch {
			case same:
				synced++
			case isImmutable(occupant) && !sameContent(occupant, desired):
				tasks = append(tasks, r.replace(ctx, occupant, desired))
				written = append(written, ns)
			default:
				tasks = append(tasks, func() error { return r.Update(ctx, updated) })
				written = append(written, ns)
			}
		case owner != "" && !live.Has(owner) && source != nil:
			tasks = append(tasks, r.takeOver(ctx, occupant, sync, source))
			written = append(written, ns)
		case owner != "":
			failures = append(failures, failure{Namespace: ns, Reason: Conflict,
				Message: "ConfigMap " + ns + "/" + name + " belongs to ConfigMapSync " + occupant.Annotations[OwnerAnnotation]})
		case sync.Spec.ConflictPolicy == "Overwrite" && source != nil && !r.isSource(ctx, occupant):
			tasks = append(tasks, r.takeOver(ctx, occupant, sync, source))
			written = append(written, ns)
		default:
			failures = append(failures, failure{Namespace: ns, Reason: Conflict,
				Message: "ConfigMap " + ns + "/" + name + " exists and is not managed by this ConfigMapSync"})
		}
	}
	stale, err := r.staleCopies(ctx, sync, name, wanted)
	if err != nil {
		return ctrl.Result{}, err
	}
	for _, cm := range stale {
		tasks = append(tasks, func() error { return r.deleteCopy(ctx, cm) })
	}

	errs := app.Parallel(tasks)
	for i, err := range errs[:len(written)] {
		if err != nil {
			failures = append(failures, failure{Namespace: written[i], Reason: WriteFailed, Message: app.Truncate(err.Error(), app.MaxMessage)})
		} else {
			synced++
		}
	}
	r.recordEvents(sync, sourceNamespace+"/"+name, errs[:len(written)], errs[len(written):], failures)
	var retry error
	for _, err := range errs {
		if err != nil {
			retry = fmt.Errorf("%d of %d writes failed, first: %w", countErrors(errs), len(errs), err)
			break
		}
	}
	if err := r.writeStatus(ctx, sync, destinations, synced, failures, len(written) > 0); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, retry
}

// recordEvents posts opsuite's Events for a pass: Synced for the copies written, CopiesDeleted
// for the stale copies deleted, and a Warning for each destination that newly fails (the status
// lists them all).
func (r *Reconciler) recordEvents(sync *api.ConfigMapSync, source string, writes, deletes []error, failures []failure) {
	if n := len(writes) - countErrors(writes); n > 0 {
		r.Recorder.Eventf(sync, corev1.EventTypeNormal, "Synced", "wrote %d copies of %s", n, source)
	}
	if n := len(deletes) - countErrors(deletes); n > 0 {
		r.Recorder.Eventf(sync, corev1.EventTypeNormal, "CopiesDeleted", "deleted %d copies no longer wanted", n)
	}
	known := sets.New[string]()
	for _, t := range sync.Status.FailedTargets {
		known.Insert(t.Namespace + "/" + t.Reason)
	}
	for _, f := range failures {
		if !known.Has(f.Namespace + "/" + f.Reason) {
			r.Recorder.Eventf(sync, corev1.EventTypeWarning, f.Reason, "%s: %s", f.Namespace, f.Message)
		}
	}
}

func countErrors(errs []error) int {
	n := 0
	for _, err := range errs {
		if err != nil {
			n++
		}
	}
	return n
}

// source is the source ConfigMap, nil when it does not exist or is not served (outside
// --namespace: treated as missing).
func (r *Reconciler) source(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error) {
	if r.Namespace != "" && namespace != r.Namespace {
		return nil, nil
	}
	source := &corev1.ConfigMap{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, source); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return source, nil
}

func sourceNamespaceOf(sync *api.ConfigMapSync) string {
	if sync.Spec.SourceNamespace != "" {
		return sync.Spec.SourceNamespace
	}
	return sync.Namespace
}

func notAllowed(source *corev1.ConfigMap, ns string, consent bool) failure {
	ref := source.Namespace + "/" + source.Name
	if !consent {
		return failure{Namespace: ns, Reason: NotAllowedBySource, Message: "ConfigMap " + ref +
			" does not allow copies: it has no " + AllowedNamespacesAnnotation + " annotation; an existing copy is kept, not updated"}
	}
	return failure{Namespace: ns, Reason: NotAllowedBySource, Message: "ConfigMap " + ref +
		" does not allow copies in namespace " + ns + "; no copy is kept there"}
}

// targets are the writable destinations, sorted, and failures for the listed ones that are not
// writable, as opsuite's _targets: the source namespace, one outside --namespace, one missing or
// being deleted. Selected namespaces are only ever writable ones.
func (r *Reconciler) targets(ctx context.Context, sync *api.ConfigMapSync, sourceNamespace string) ([]string, []failure, error) {
	writable := sets.New[string]()
	var failures []failure
	for _, name := range sets.List(sets.New(sync.Spec.DestinationNamespaces...)) {
		ns := &corev1.Namespace{}
		err := r.Get(ctx, types.NamespacedName{Name: name}, ns)
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, nil, err
		}
		switch {
		case name == sourceNamespace:
			failures = append(failures, failure{Namespace: name, Reason: SourceNamespace,
				Message: "the source namespace is never a destination"})
		case r.Namespace != "" && name != r.Namespace:
			failures = append(failures, failure{Namespace: name, Reason: NotWatched,
				Message: "the operator does not watch this namespace"})
		case err != nil:
			failures = append(failures, failure{Namespace: name, Reason: NamespaceMissing,
				Message: "the namespace does not exist; the copy is made when it appears"})
		case ns.DeletionTimestamp != nil:
			failures = append(failures, failure{Namespace: name, Reason: NamespaceMissing,
				Message: "the namespace is being deleted"})
		default:
			writable.Insert(name)
		}
	}
	if sync.Spec.NamespaceSelector != nil {
		selector, err := metav1.LabelSelectorAsSelector(sync.Spec.NamespaceSelector)
		if err != nil {
			return nil, append(failures, failure{Reason: "InvalidSpec", Message: app.Truncate(err.Error(), app.MaxMessage)}), nil
		}
		var selected corev1.NamespaceList
		if err := r.List(ctx, &selected, client.MatchingLabelsSelector{Selector: selector}); err != nil {
			return nil, nil, err
		}
		for _, ns := range selected.Items {
			if ns.Name != sourceNamespace && ns.DeletionTimestamp == nil && (r.Namespace == "" || ns.Name == r.Namespace) {
				writable.Insert(ns.Name)
			}
		}
	}
	return sets.List(writable), failures, nil
}

// liveOwners are the UIDs of the existing ConfigMapSyncs.
func (r *Reconciler) liveOwners(ctx context.Context) (sets.Set[string], error) {
	var syncs api.ConfigMapSyncList
	if err := r.List(ctx, &syncs); err != nil {
		return nil, err
	}
	live := sets.New[string]()
	for _, s := range syncs.Items {
		live.Insert(string(s.UID))
	}
	return live, nil
}

// isSource tells whether some ConfigMapSync reads cm (never taken over).
func (r *Reconciler) isSource(ctx context.Context, cm *corev1.ConfigMap) bool {
	var syncs api.ConfigMapSyncList
	err := r.List(ctx, &syncs, client.MatchingFields{sourceIndex: cm.Namespace + "/" + cm.Name})
	return err != nil || len(syncs.Items) > 0
}

// staleCopies are the sync's copies of this source in namespaces it no longer wants.
func (r *Reconciler) staleCopies(ctx context.Context, sync *api.ConfigMapSync, name string, wanted sets.Set[string]) ([]*corev1.ConfigMap, error) {
	var copies corev1.ConfigMapList
	if err := r.List(ctx, &copies, client.MatchingFields{OwnerIndex: string(sync.UID)}); err != nil {
		return nil, err
	}
	var stale []*corev1.ConfigMap
	for i := range copies.Items {
		cm := &copies.Items[i]
		if cm.DeletionTimestamp == nil && isExactCopy(cm) && !(cm.Name == name && wanted.Has(cm.Namespace)) {
			stale = append(stale, cm)
		}
	}
	return stale, nil
}

// isExactCopy tells whether cm is named as the source its annotation names (a marked
// ConfigMap saved under another name is someone else's).
func isExactCopy(cm *corev1.ConfigMap) bool {
	_, name, ok := strings.Cut(cm.Annotations[SourceAnnotation], "/")
	return ok && name == cm.Name
}

func (r *Reconciler) deleteCopy(ctx context.Context, cm *corev1.ConfigMap) error {
	uid, version := cm.UID, cm.ResourceVersion
	err := r.Delete(ctx, cm, client.Preconditions{UID: &uid, ResourceVersion: &version})
	return client.IgnoreNotFound(err)
}

// replace deletes an immutable copy and creates it again with new content.
func (r *Reconciler) replace(ctx context.Context, occupant, desired *corev1.ConfigMap) func() error {
	return func() error {
		if err := r.deleteCopy(ctx, occupant); err != nil {
			return err
		}
		return r.Create(ctx, desired)
	}
}

// takeOver makes occupant (unmarked, or the copy of a gone ConfigMapSync) a copy of source.
func (r *Reconciler) takeOver(ctx context.Context, occupant *corev1.ConfigMap, sync *api.ConfigMapSync, source *corev1.ConfigMap) func() error {
	desired := Render(sync, source, occupant.Namespace)
	if isImmutable(occupant) {
		return r.replace(ctx, occupant, desired)
	}
	updated, _ := Updated(occupant, desired, sync)
	return func() error { return r.Update(ctx, updated) }
}

// collect ends the copies of the gone ConfigMapSync key as each copy's deletion policy says,
// after checking that no ConfigMapSync of the copy's owner UID exists.
func (r *Reconciler) collect(ctx context.Context, key types.NamespacedName) error {
	var copies corev1.ConfigMapList
	if err := r.List(ctx, &copies, client.HasLabels{OwnerUIDLabel}); err != nil {
		return err
	}
	live, err := r.liveOwners(ctx)
	if err != nil {
		return err
	}
	prefix := key.Namespace + "/" + key.Name + "/"
	var tasks []func() error
	for i := range copies.Items {
		cm := &copies.Items[i]
		if !strings.HasPrefix(cm.Annotations[OwnerAnnotation], prefix) || live.Has(cm.Labels[OwnerUIDLabel]) ||
			cm.DeletionTimestamp != nil || !isExactCopy(cm) {
			continue
		}
		if cm.Annotations[DeletionPolicyAnnotation] == "Orphan" {
			tasks = append(tasks, func() error { return client.IgnoreNotFound(r.Update(ctx, released(cm))) })
		} else {
			tasks = append(tasks, func() error { return r.deleteCopy(ctx, cm) })
		}
	}
	for _, err := range app.Parallel(tasks) {
		if err != nil {
			return err
		}
	}
	return nil
}

// writeStatus patches the status when it changed.
func (r *Reconciler) writeStatus(ctx context.Context, sync *api.ConfigMapSync, targets, synced int, failures []failure, wrote bool) error {
	sort.Slice(failures, func(i, j int) bool { return failures[i].Namespace < failures[j].Namespace })
	status := api.ConfigMapSyncStatus{
		Source:             sourceNamespaceOf(sync) + "/" + sync.Spec.ConfigMapName,
		TargetNamespaces:   int32(targets),
		SyncedNamespaces:   int32(synced),
		FailedNamespaces:   int32(len(failures)),
		FailedTargets:      failures[:min(len(failures), MaxFailedTargets)],
		LastSyncTime:       sync.Status.LastSyncTime,
		ObservedGeneration: sync.Generation,
	}
	if wrote || (status.LastSyncTime == nil && len(failures) == 0) {
		now := metav1.NewTime(r.now().Truncate(time.Second))
		status.LastSyncTime = &now
	}
	if len(status.FailedTargets) == 0 {
		status.FailedTargets = nil
	}
	if equality.Semantic.DeepEqual(status, sync.Status) {
		return nil
	}
	original := sync.DeepCopy()
	sync.Status = status
	return r.Status().Patch(ctx, sync, client.MergeFrom(original))
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Indexes are the ConfigMapSync cache's indexes: by spec.configMapName (the ConfigMap watch
// maps through it) and by source namespace/name (a source is never taken over).
var Indexes = map[string]client.IndexerFunc{
	configMapNameIndex: func(obj client.Object) []string {
		return []string{obj.(*api.ConfigMapSync).Spec.ConfigMapName}
	},
	sourceIndex: func(obj client.Object) []string {
		sync := obj.(*api.ConfigMapSync)
		return []string{sourceNamespaceOf(sync) + "/" + sync.Spec.ConfigMapName}
	},
}

// syncsForConfigMap maps a ConfigMap to the ConfigMapSyncs it may concern: those copying a
// ConfigMap of its name (its source, or one whose destination it occupies), and the one its
// owner annotation names (gone, maybe).
func (r *Reconciler) syncsForConfigMap(ctx context.Context, obj client.Object) []reconcile.Request {
	var syncs api.ConfigMapSyncList
	if err := r.List(ctx, &syncs, client.MatchingFields{configMapNameIndex: obj.GetName()}); err != nil {
		return nil
	}
	var requests []reconcile.Request
	for _, s := range syncs.Items {
		requests = append(requests, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: s.Namespace, Name: s.Name}})
	}
	if owner := strings.SplitN(obj.GetAnnotations()[OwnerAnnotation], "/", 3); len(owner) == 3 {
		key := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: owner[0], Name: owner[1]}}
		if !slices.Contains(requests, key) {
			requests = append(requests, key)
		}
	}
	return requests
}

// allSyncs maps a namespace event to every ConfigMapSync (any may list or select it).
func (r *Reconciler) allSyncs(ctx context.Context, _ client.Object) []reconcile.Request {
	var syncs api.ConfigMapSyncList
	if err := r.List(ctx, &syncs); err != nil {
		return nil
	}
	requests := make([]reconcile.Request, 0, len(syncs.Items))
	for _, s := range syncs.Items {
		requests = append(requests, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: s.Namespace, Name: s.Name}})
	}
	return requests
}

// SetupWithManager watches ConfigMapSyncs, ConfigMaps (sources and copies) and namespaces.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	for name, extract := range Indexes {
		if err := mgr.GetFieldIndexer().IndexField(context.Background(), &api.ConfigMapSync{}, name, extract); err != nil {
			return err
		}
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &corev1.ConfigMap{}, OwnerIndex, OwnerOf); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&api.ConfigMapSync{}).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.syncsForConfigMap)).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.allSyncs)).
		Named("configmapsync").
		WithOptions(controller.Options{MaxConcurrentReconciles: app.MaxConcurrentReconciles}).
		Complete(r)
}
