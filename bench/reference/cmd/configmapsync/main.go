// Command configmapsync is the reference ConfigMapSync operator (benchmarks only; never
// shipped).
package main

import (
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"opsuite.dev/bench/reference/api"
	"opsuite.dev/bench/reference/internal/app"
	"opsuite.dev/bench/reference/internal/configmapsync"
)

func main() {
	app.Main("configmapsync", api.AddConfigMapSync, func(mgr manager.Manager, opts app.Options) error {
		return (&configmapsync.Reconciler{Client: mgr.GetClient(), Namespace: opts.Namespace,
			Recorder: app.Recorder(mgr, "configmapsync")}).SetupWithManager(mgr)
	}, &api.ConfigMapSync{}, &corev1.ConfigMap{}, &corev1.Namespace{})
}
