// Command configmapsync is the reference ConfigMapSync operator (benchmarks only; never
// shipped).
package main

import (
	"os"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"opsuite.dev/bench/reference/api"
	"opsuite.dev/bench/reference/internal/app"
	"opsuite.dev/bench/reference/internal/configmapsync"
)

func main() {
	opts := app.ParseFlags("configmapsync")
	scheme := app.NewScheme(api.AddConfigMapSync)
	mgr, err := app.NewManager(opts, scheme, &api.ConfigMapSync{}, &corev1.ConfigMap{}, &corev1.Namespace{})
	if err == nil {
		err = (&configmapsync.Reconciler{Client: mgr.GetClient(), Namespace: opts.Namespace}).SetupWithManager(mgr)
	}
	if err != nil {
		ctrl.Log.Error(err, "unable to set up the manager")
		os.Exit(1)
	}
	app.Run(mgr)
}
