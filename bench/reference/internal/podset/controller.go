// Package podset is the reference PodSet controller: keep spec.replicas pods from
// spec.template, owned by the PodSet, and report their counts, as a ReplicaSet does.
package podset

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"opsuite.dev/bench/reference/api"
	"opsuite.dev/bench/reference/internal/app"
)

// BurstReplicas caps the creates or deletes of one reconcile, as the ReplicaSet controller's
// burstReplicas (and opsuite's BURST_REPLICAS) do.
const BurstReplicas = 500

// ExpectationsTimeout is how long the controller waits for its cache to show the pods it
// created or deleted before it acts again anyway (the ReplicaSet controller's 5 minutes).
const ExpectationsTimeout = 5 * time.Minute

// Reconciler reconciles PodSets.
type Reconciler struct {
	client.Client
	Scheme *runtime.Scheme
	// Recorder posts the ReplicaSet controller's Events (SuccessfulCreate, FailedCreate,
	// SuccessfulDelete, FailedDelete), as opsuite's PodSet operator does.
	Recorder record.EventRecorder

	mu      sync.Mutex
	pending map[types.NamespacedName]*expectation
}

// expectation is what the cache must show before the next scale step: the names of the pods
// created and the UIDs of those deleted (the ReplicaSet controller's "expectations").
type expectation struct {
	created sets.Set[string]
	deleted sets.Set[types.UID]
	since   time.Time
}

// +kubebuilder:rbac:groups=apps.opsuite.dev,resources=podsets,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps.opsuite.dev,resources=podsets/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;delete

// Reconcile creates or deletes pods until spec.replicas are active, then writes the status.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logf.FromContext(ctx)
	podSet := &api.PodSet{}
	if err := r.Get(ctx, req.NamespacedName, podSet); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if podSet.DeletionTimestamp != nil {
		return ctrl.Result{}, nil // the garbage collector deletes the pods
	}
	selector, err := Selector(podSet)
	if err != nil {
		log.Error(err, "invalid selector")
		return ctrl.Result{}, nil
	}
	var list corev1.PodList
	if err := r.List(ctx, &list, client.InNamespace(podSet.Namespace),
		client.MatchingLabelsSelector{Selector: selector}); err != nil {
		return ctrl.Result{}, err
	}
	active := activePods(list.Items, podSet.UID)

	waiting := !r.satisfied(req.NamespacedName, list.Items)
	if !waiting {
		want := int(ptrOr(podSet.Spec.Replicas, 1))
		switch diff := want - len(active); {
		case diff > 0:
			err = r.create(ctx, podSet, min(diff, BurstReplicas))
		case diff < 0:
			err = r.delete(ctx, podSet, active, min(-diff, BurstReplicas))
		}
	}
	requeue, statusErr := r.writeStatus(ctx, podSet, selector, active)
	if err != nil {
		return ctrl.Result{}, err
	}
	if waiting && requeue == 0 {
		requeue = ExpectationsTimeout // in case the pods' events never come
	}
	return ctrl.Result{RequeueAfter: requeue}, statusErr
}

// Selector is the PodSet's selector, or its name label when it has none.
func Selector(podSet *api.PodSet) (labels.Selector, error) {
	if podSet.Spec.Selector == nil {
		return labels.SelectorFromSet(labels.Set{api.PodSetNameLabel: podSet.Name}), nil
	}
	return metav1.LabelSelectorAsSelector(podSet.Spec.Selector)
}

func ptrOr(value *int32, fallback int32) int32 {
	if value == nil {
		return fallback
	}
	return *value
}

// activePods are the pods the PodSet controls that are neither terminated nor being deleted.
func activePods(pods []corev1.Pod, owner types.UID) []*corev1.Pod {
	var active []*corev1.Pod
	for i := range pods {
		pod := &pods[i]
		ref := metav1.GetControllerOf(pod)
		if ref == nil || ref.UID != owner || pod.DeletionTimestamp != nil ||
			pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		active = append(active, pod)
	}
	return active
}

// satisfied tells whether the cache shows every create and delete of the last scale step.
func (r *Reconciler) satisfied(key types.NamespacedName, pods []corev1.Pod) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	exp := r.pending[key]
	if exp == nil {
		return true
	}
	present := sets.New[types.UID]()
	for i := range pods {
		exp.created.Delete(pods[i].Name)
		if pods[i].DeletionTimestamp == nil {
			present.Insert(pods[i].UID)
		}
	}
	for uid := range exp.deleted {
		if !present.Has(uid) {
			exp.deleted.Delete(uid)
		}
	}
	if exp.created.Len() == 0 && exp.deleted.Len() == 0 || time.Since(exp.since) > ExpectationsTimeout {
		delete(r.pending, key)
		return true
	}
	return false
}

func (r *Reconciler) expect(key types.NamespacedName) *expectation {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending == nil {
		r.pending = map[types.NamespacedName]*expectation{}
	}
	exp := &expectation{created: sets.New[string](), deleted: sets.New[types.UID](), since: time.Now()}
	r.pending[key] = exp
	return exp
}

func (r *Reconciler) forget(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.pending, key)
}

// newPod is a pod from the PodSet's template, controlled by the PodSet.
func (r *Reconciler) newPod(podSet *api.PodSet) (*corev1.Pod, error) {
	template := podSet.Spec.Template.DeepCopy()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: podSet.Name + "-",
			Namespace:    podSet.Namespace,
			Labels:       template.Labels,
			Annotations:  template.Annotations,
		},
		Spec: template.Spec,
	}
	if podSet.Spec.Selector == nil {
		if pod.Labels == nil {
			pod.Labels = map[string]string{}
		}
		pod.Labels[api.PodSetNameLabel] = podSet.Name
	}
	if err := controllerutil.SetControllerReference(podSet, pod, r.Scheme); err != nil {
		return nil, err
	}
	return pod, nil
}

// create makes count pods in the ReplicaSet controller's slow-start batches (1, 2, 4, ...):
// the first failure stops further batches.
func (r *Reconciler) create(ctx context.Context, podSet *api.PodSet, count int) error {
	key := types.NamespacedName{Namespace: podSet.Namespace, Name: podSet.Name}
	exp := r.expect(key)
	var mu sync.Mutex
	for batch, done := 1, 0; done < count; batch *= 2 {
		size := min(batch, count-done)
		errs := make(chan error, size)
		var wg sync.WaitGroup
		for range size {
			wg.Go(func() {
				pod, err := r.newPod(podSet)
				if err == nil {
					err = r.Create(ctx, pod)
				}
				if err != nil {
					r.Recorder.Eventf(podSet, corev1.EventTypeWarning, "FailedCreate", "Error creating: %v", err)
					errs <- err
					return
				}
				r.Recorder.Eventf(podSet, corev1.EventTypeNormal, "SuccessfulCreate", "Created pod: %s", pod.Name)
				mu.Lock()
				exp.created.Insert(pod.Name)
				mu.Unlock()
			})
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			return fmt.Errorf("creating pods: %w", err)
		}
		done += size
	}
	return nil
}

// delete removes count of the active pods, the ones a ReplicaSet removes first, all at once.
func (r *Reconciler) delete(ctx context.Context, podSet *api.PodSet, active []*corev1.Pod, count int) error {
	key := types.NamespacedName{Namespace: podSet.Namespace, Name: podSet.Name}
	sort.SliceStable(active, func(i, j int) bool { return deleteFirst(active[i], active[j]) })
	victims := active[:count]
	exp := r.expect(key)
	for _, pod := range victims {
		exp.deleted.Insert(pod.UID)
	}
	errs := make(chan error, len(victims))
	var wg sync.WaitGroup
	for _, pod := range victims {
		wg.Go(func() {
			err := r.Delete(ctx, pod, client.Preconditions{UID: &pod.UID})
			switch {
			case err == nil:
				r.Recorder.Eventf(podSet, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted pod: %s", pod.Name)
			case !apierrors.IsNotFound(err):
				r.Recorder.Eventf(podSet, corev1.EventTypeWarning, "FailedDelete", "Error deleting: %v", err)
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return fmt.Errorf("deleting pods: %w", err)
	}
	return nil
}

// deleteFirst is a short form of the ReplicaSet controller's order: unscheduled before
// scheduled, Pending before Unknown before Running, not ready before ready, newer before older.
func deleteFirst(a, b *corev1.Pod) bool {
	if (a.Spec.NodeName == "") != (b.Spec.NodeName == "") {
		return a.Spec.NodeName == ""
	}
	rank := map[corev1.PodPhase]int{corev1.PodPending: 0, corev1.PodUnknown: 1, corev1.PodRunning: 2}
	if rank[a.Status.Phase] != rank[b.Status.Phase] {
		return rank[a.Status.Phase] < rank[b.Status.Phase]
	}
	if isReady(a) != isReady(b) {
		return !isReady(a)
	}
	return b.CreationTimestamp.Before(&a.CreationTimestamp)
}

func readySince(pod *corev1.Pod) (bool, time.Time) {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue, c.LastTransitionTime.Time
		}
	}
	return false, time.Time{}
}

func isReady(pod *corev1.Pod) bool {
	ready, _ := readySince(pod)
	return ready
}

// writeStatus patches the counts when they changed; it returns when to look again for a pod
// that becomes available after minReadySeconds.
func (r *Reconciler) writeStatus(ctx context.Context, podSet *api.PodSet, selector labels.Selector, active []*corev1.Pod) (time.Duration, error) {
	minReady := time.Duration(podSet.Spec.MinReadySeconds) * time.Second
	now := time.Now()
	status := api.PodSetStatus{
		Replicas:           int32(len(active)),
		Selector:           selector.String(),
		ObservedGeneration: podSet.Generation,
	}
	var requeue time.Duration
	for _, pod := range active {
		ready, since := readySince(pod)
		if !ready {
			continue
		}
		status.ReadyReplicas++
		if wait := since.Add(minReady).Sub(now); minReady == 0 || wait <= 0 {
			status.AvailableReplicas++
		} else if requeue == 0 || wait < requeue {
			requeue = wait
		}
	}
	if status == podSet.Status {
		return requeue, nil
	}
	original := podSet.DeepCopy()
	podSet.Status = status
	return requeue, r.Status().Patch(ctx, podSet, client.MergeFrom(original))
}

// SetupWithManager watches PodSets and the pods they control.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&api.PodSet{}).
		Owns(&corev1.Pod{}).
		Named("podset").
		WithOptions(controller.Options{MaxConcurrentReconciles: app.MaxConcurrentReconciles}).
		Complete(r)
}
