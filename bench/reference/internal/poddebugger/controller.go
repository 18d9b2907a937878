// Package poddebugger is the reference PodDebugger controller: add one ephemeral container to
// every live pod the selector matches (at most maxPods), once, through the
// pods/ephemeralcontainers subresource.
package poddebugger

import (
	"context"
	"fmt"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"opsuite.dev/bench/reference/api"
	"opsuite.dev/bench/reference/internal/app"
)

// DefaultMaxPods is the CRD's default of spec.maxPods.
const DefaultMaxPods = 10

// MaxFailedPods bounds status.failedPods, as the CRD does.
const MaxFailedPods = 20

// Reconciler reconciles PodDebuggers.
type Reconciler struct {
	client.Client
	// Recorder posts opsuite's Events: DebugContainerAdded (Normal) on the pod and on the
	// PodDebugger, InjectionFailed (Warning) on the PodDebugger, DebugContainerRefused
	// (Warning) on a pod that refused.
	Recorder record.EventRecorder

	mu sync.Mutex
	// sent holds, per pod UID, the container whose PATCH succeeded, until the cache shows it:
	// a reconcile on a stale cache must not send it again.
	sent map[types.UID]string
}

// +kubebuilder:rbac:groups=debug.opsuite.dev,resources=poddebuggers,verbs=get;list;watch
// +kubebuilder:rbac:groups=debug.opsuite.dev,resources=poddebuggers/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=pods/ephemeralcontainers,verbs=patch

// Reconcile injects the debugger's container into the matching pods that lack it, within
// maxPods, then writes the counts.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	debugger := &api.PodDebugger{}
	if err := r.Get(ctx, req.NamespacedName, debugger); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if debugger.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	selector, err := metav1.LabelSelectorAsSelector(&debugger.Spec.Selector)
	if err != nil || selector.Empty() {
		logf.FromContext(ctx).Error(err, "invalid selector")
		return ctrl.Result{}, nil
	}
	var list corev1.PodList
	if err := r.List(ctx, &list, client.InNamespace(debugger.Namespace),
		client.MatchingLabelsSelector{Selector: selector}); err != nil {
		return ctrl.Result{}, err
	}
	container, err := Container(debugger)
	if err != nil {
		return ctrl.Result{}, err
	}
	plan := r.plan(debugger, list.Items, container.Name)

	tasks := make([]func() error, len(plan.inject))
	for i, pod := range plan.inject {
		tasks[i] = func() error { return r.inject(ctx, pod, container) }
	}
	var failed []api.FailedPod
	var retry error
	for i, err := range app.Parallel(tasks) {
		pod := plan.inject[i]
		if err == nil {
			r.Recorder.Eventf(pod, corev1.EventTypeNormal, "DebugContainerAdded",
				"PodDebugger %s added %s (image %s)", debugger.Name, container.Name, container.Image)
			r.Recorder.Eventf(debugger, corev1.EventTypeNormal, "DebugContainerAdded",
				"added %s (image %s) to pod %s", container.Name, container.Image, pod.Name)
			r.remember(pod.UID, container.Name)
			plan.status.DebuggedCount++
			plan.status.DebuggedPodsTotal++
			continue
		}
		retry = fmt.Errorf("injecting into %s: %w", pod.Name, err)
		if apierrors.IsForbidden(err) || apierrors.IsInvalid(err) {
			r.Recorder.Eventf(pod, corev1.EventTypeWarning, "DebugContainerRefused",
				"PodDebugger %s could not add ephemeral container %s: %v", debugger.Name, container.Name, err)
			r.Recorder.Eventf(debugger, corev1.EventTypeWarning, "InjectionFailed",
				"pod %s refused %s: %v", pod.Name, container.Name, err)
			failed = append(failed, api.FailedPod{Pod: pod.Name, UID: string(pod.UID), Container: container.Name,
				Reason: "Rejected", Message: app.Truncate(err.Error(), app.MaxMessage)})
		}
	}
	sort.Slice(failed, func(i, j int) bool { return failed[i].Pod < failed[j].Pod })
	plan.status.FailedPods = failed[:min(len(failed), MaxFailedPods)]
	if len(plan.status.FailedPods) == 0 {
		plan.status.FailedPods = nil
	}
	if !equality.Semantic.DeepEqual(plan.status, debugger.Status) {
		original := debugger.DeepCopy()
		debugger.Status = plan.status
		if err := r.Status().Patch(ctx, debugger, client.MergeFrom(original)); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, retry // an error: controller-runtime's backoff retries
}

// plan is one reconcile's work: the pods to inject into and the counts before injecting.
type plan struct {
	inject []*corev1.Pod
	status api.PodDebuggerStatus
}

func (r *Reconciler) plan(debugger *api.PodDebugger, pods []corev1.Pod, name string) plan {
	out := plan{status: api.PodDebuggerStatus{ObservedGeneration: debugger.Generation}}
	var older, fresh []*corev1.Pod
	for i := range pods {
		pod := &pods[i]
		if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		out.status.MatchedPods++
		holds, hasOlder := false, false
		for _, c := range pod.Spec.EphemeralContainers {
			if c.Name == name {
				holds = true
			}
			if ownedBy(debugger.Name, c.Name) {
				out.status.DebuggedPodsTotal++
				hasOlder = hasOlder || c.Name != name
			}
		}
		if !holds && r.wasSent(pod.UID, name) {
			holds = true // sent, the cache does not show it yet
			out.status.DebuggedPodsTotal++
		}
		switch {
		case holds:
			out.status.DebuggedCount++
		case hasOlder:
			older = append(older, pod)
		default:
			fresh = append(fresh, pod)
		}
	}
	maxPods := int32(DefaultMaxPods)
	if debugger.Spec.MaxPods != nil {
		maxPods = *debugger.Spec.MaxPods
	}
	byAge := func(list []*corev1.Pod) {
		sort.SliceStable(list, func(i, j int) bool {
			a, b := list[i], list[j]
			if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
				return a.CreationTimestamp.Before(&b.CreationTimestamp)
			}
			return a.Name < b.Name
		})
	}
	byAge(older)
	byAge(fresh)
	candidates := append(older, fresh...)
	room := max(0, int(maxPods-out.status.DebuggedCount))
	out.inject = candidates[:min(room, len(candidates))]
	out.status.SkippedPods = int32(len(candidates) - len(out.inject))
	return out
}

// inject adds the container through the pods/ephemeralcontainers subresource (a strategic
// merge patch of the one container).
func (r *Reconciler) inject(ctx context.Context, pod *corev1.Pod, container corev1.EphemeralContainer) error {
	patched := pod.DeepCopy()
	patched.Spec.EphemeralContainers = append(patched.Spec.EphemeralContainers, container)
	return r.SubResource("ephemeralcontainers").Patch(ctx, patched, client.StrategicMergeFrom(pod))
}

func (r *Reconciler) remember(uid types.UID, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sent == nil {
		r.sent = map[types.UID]string{}
	}
	r.sent[uid] = name
}

// wasSent tells whether the container's PATCH to the pod succeeded (the record is dropped
// once a pod event shows the container: forgetShown).
func (r *Reconciler) wasSent(uid types.UID, name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sent[uid] == name
}

// forgetShown drops the sent records the cache now shows.
func (r *Reconciler) forgetShown(pod *corev1.Pod) {
	r.mu.Lock()
	defer r.mu.Unlock()
	name, ok := r.sent[pod.UID]
	if !ok {
		return
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if c.Name == name {
			delete(r.sent, pod.UID)
			return
		}
	}
}

// debuggersForPod maps a pod to the PodDebuggers of its namespace whose selector matches it.
func (r *Reconciler) debuggersForPod(ctx context.Context, obj client.Object) []reconcile.Request {
	pod, ok := obj.(*corev1.Pod)
	if ok && pod.DeletionTimestamp != nil {
		r.mu.Lock()
		delete(r.sent, pod.UID)
		r.mu.Unlock()
	} else if ok {
		r.forgetShown(pod)
	}
	var debuggers api.PodDebuggerList
	if err := r.List(ctx, &debuggers, client.InNamespace(obj.GetNamespace())); err != nil {
		return nil
	}
	var requests []reconcile.Request
	for _, d := range debuggers.Items {
		selector, err := metav1.LabelSelectorAsSelector(&d.Spec.Selector)
		if err == nil && !selector.Empty() && selector.Matches(labels.Set(obj.GetLabels())) {
			requests = append(requests, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: d.Namespace, Name: d.Name}})
		}
	}
	return requests
}

// SetupWithManager watches PodDebuggers and pods.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&api.PodDebugger{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.debuggersForPod)).
		Named("poddebugger").
		WithOptions(controller.Options{MaxConcurrentReconciles: app.MaxConcurrentReconciles}).
		Complete(r)
}
