// Command poddebugger is the reference PodDebugger operator (benchmarks only; never shipped).
// It has no admission-policy gate: the benchmark runs opsuite's operator with
// --allow-without-admission-policy.
package main

import (
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"opsuite.dev/bench/reference/api"
	"opsuite.dev/bench/reference/internal/app"
	"opsuite.dev/bench/reference/internal/poddebugger"
)

func main() {
	app.Main("poddebugger", api.AddPodDebugger, func(mgr manager.Manager, _ app.Options) error {
		return (&poddebugger.Reconciler{Client: mgr.GetClient(), Recorder: app.Recorder(mgr, "poddebugger")}).SetupWithManager(mgr)
	}, &api.PodDebugger{}, &corev1.Pod{})
}
