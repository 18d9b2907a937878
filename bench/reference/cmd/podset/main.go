// Command podset is the reference PodSet operator (benchmarks only; never shipped).
package main

import (
	"os"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"opsuite.dev/bench/reference/api"
	"opsuite.dev/bench/reference/internal/app"
	"opsuite.dev/bench/reference/internal/podset"
)

func main() {
	opts := app.ParseFlags("podset")
	scheme := app.NewScheme(api.AddPodSet)
	mgr, err := app.NewManager(opts, scheme, &api.PodSet{}, &corev1.Pod{})
	if err == nil {
		err = (&podset.Reconciler{Client: mgr.GetClient(), Scheme: scheme}).SetupWithManager(mgr)
	}
	if err != nil {
		ctrl.Log.Error(err, "unable to set up the manager")
		os.Exit(1)
	}
	app.Run(mgr)
}
