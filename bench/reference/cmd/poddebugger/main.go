// Command poddebugger is the reference PodDebugger operator (benchmarks only; never shipped).
// It has no admission-policy gate: the benchmark runs opsuite's operator with
// --allow-without-admission-policy.
package main

import (
	"os"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"opsuite.dev/bench/reference/api"
	"opsuite.dev/bench/reference/internal/app"
	"opsuite.dev/bench/reference/internal/poddebugger"
)

func main() {
	opts := app.ParseFlags("poddebugger")
	scheme := app.NewScheme(api.AddPodDebugger)
	mgr, err := app.NewManager(opts, scheme, &api.PodDebugger{}, &corev1.Pod{})
	if err == nil {
		err = (&poddebugger.Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr)
	}
	if err != nil {
		ctrl.Log.Error(err, "unable to set up the manager")
		os.Exit(1)
	}
	app.Run(mgr)
}
