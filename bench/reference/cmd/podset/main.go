// Command podset is the reference PodSet operator (benchmarks only; never shipped).
package main

import (
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"opsuite.dev/bench/reference/api"
	"opsuite.dev/bench/reference/internal/app"
	"opsuite.dev/bench/reference/internal/podset"
)

func main() {
	app.Main("podset", api.AddPodSet, func(mgr manager.Manager, _ app.Options) error {
		return (&podset.Reconciler{Client: mgr.GetClient(), Scheme: mgr.GetScheme(), Recorder: app.Recorder(mgr, "podset")}).SetupWithManager(mgr)
	}, &api.PodSet{}, &corev1.Pod{})
}
