// Package app is the part of a kubebuilder main.go that the three references share: the flags
// and the manager, with controller-runtime's defaults everywhere opsuite has no setting of its
// own.
package app

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"sync"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// MaxConcurrentReconciles is opsuite's default --max-concurrent-reconciles
// (shared/opsuite_common/options.py): the references run as many workers per controller.
const MaxConcurrentReconciles = 4

// MaxParallelRequests bounds the writes one reconcile has in flight at once: opsuite's
// MAX_PARALLEL_REQUESTS (shared/opsuite_common/kube.py), so that neither side wins by sending
// more requests at a time.
const MaxParallelRequests = 64

// Options are the flags of a kubebuilder main.go (--kubeconfig is controller-runtime's own,
// registered on flag.CommandLine by its config package).
type Options struct {
	MetricsAddr          string
	ProbeAddr            string
	LeaderElect          bool
	LeaderElectionNS     string
	Namespace            string
	ZapOptions           zap.Options
	LeaderElectionPrefix string
}

// parseFlags reads the flags from os.Args; name names the Lease (<name>.reference.opsuite.dev).
func parseFlags(name string) Options {
	opts := Options{LeaderElectionPrefix: name, ZapOptions: zap.Options{Development: false}}
	flag.StringVar(&opts.MetricsAddr, "metrics-bind-address", ":8080",
		`The address the metrics endpoint binds to; "0" disables it.`)
	flag.StringVar(&opts.ProbeAddr, "health-probe-bind-address", ":8081",
		`The address the probe endpoint binds to; "0" disables it.`)
	flag.BoolVar(&opts.LeaderElect, "leader-elect", false,
		"Enable leader election for the controller manager.")
	flag.StringVar(&opts.LeaderElectionNS, "leader-election-namespace", "",
		"Namespace of the leader election Lease (default: the pod's; required out of cluster).")
	flag.StringVar(&opts.Namespace, "namespace", "",
		"Watch only this namespace (default: all namespaces).")
	opts.ZapOptions.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts.ZapOptions)))
	return opts
}

// NewScheme is client-go's scheme plus what add registers.
func NewScheme(add func(*runtime.Scheme) error) *runtime.Scheme {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(add(scheme))
	return scheme
}

// newManager is a manager with controller-runtime's default options (full objects cached, no
// transforms; client QPS and burst as ctrl.GetConfig leaves them: client-side rate limiting off,
// as opsuite's client has none either), the cache restricted to --namespace when given, and
// /healthz (ping) and /readyz (the informers of watched synced).
func newManager(opts Options, scheme *runtime.Scheme, watched ...client.Object) (manager.Manager, error) {
	var cacheOpts cache.Options
	if opts.Namespace != "" {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{opts.Namespace: {}}
	}
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                  scheme,
		Cache:                   cacheOpts,
		Metrics:                 metricsserver.Options{BindAddress: opts.MetricsAddr},
		HealthProbeBindAddress:  opts.ProbeAddr,
		LeaderElection:          opts.LeaderElect,
		LeaderElectionID:        opts.LeaderElectionPrefix + ".reference.opsuite.dev",
		LeaderElectionNamespace: opts.LeaderElectionNS,
	})
	if err != nil {
		return nil, err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("readyz", CacheSynced(mgr.GetCache(), watched...)); err != nil {
		return nil, err
	}
	return mgr, nil
}

// CacheSynced passes once the informer of every kind in watched has synced (its initial list
// is in the cache), so that start-to-Ready compares with opsuite's /readyz, which waits for its
// watches' initial lists. (kubebuilder's scaffold uses healthz.Ping, which passes before
// anything is cached.)
func CacheSynced(c cache.Cache, watched ...client.Object) healthz.Checker {
	return func(req *http.Request) error {
		for _, obj := range watched {
			informer, err := c.GetInformer(req.Context(), obj, cache.BlockUntilSynced(false))
			if err != nil {
				return err
			}
			if !informer.HasSynced() {
				return fmt.Errorf("the %T cache has not synced", obj)
			}
		}
		return nil
	}
}

// Main is a reference operator's main: the flags (name names the Lease), the scheme add
// registers the custom resource in, a manager whose caches hold the watched types, and the
// reconciler setup wires into it; it exits 1 when any of that fails or the manager does.
func Main(
	name string,
	add func(*runtime.Scheme) error,
	setup func(mgr manager.Manager, opts Options) error,
	watched ...client.Object,
) {
	opts := parseFlags(name)
	mgr, err := newManager(opts, NewScheme(add), watched...)
	if err == nil {
		err = setup(mgr, opts)
	}
	if err != nil {
		ctrl.Log.Error(err, "unable to set up the manager")
		os.Exit(1)
	}
	run(mgr)
}

// run starts the manager and exits 1 when it fails.
func run(mgr manager.Manager) {
	log := ctrl.Log.WithName("setup")
	log.Info("starting manager")
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "problem running manager")
		os.Exit(1)
	}
}

// Recorder is the manager's core/v1 Event recorder for the controller name: client-go's
// EventBroadcaster, whose EventCorrelator folds repeats (10 similar events into one "combined from
// similar events" Event; a token bucket of 25 per object), as opsuite's EventRecorder does
// (shared/opsuite_common/events.py). GetEventRecorderFor is deprecated in controller-runtime
// v0.24 for GetEventRecorder (events.k8s.io/v1), which posts one Event per distinct message and
// no core/v1 Event; this one writes the same objects opsuite writes, folded the same way.
func Recorder(mgr manager.Manager, name string) record.EventRecorder {
	return mgr.GetEventRecorderFor(name) //nolint:staticcheck // see the doc comment
}

// Parallel runs every task, at most MaxParallelRequests at a time, and returns their errors
// (nil for a success) in order.
func Parallel(tasks []func() error) []error {
	errs := make([]error, len(tasks))
	slots := make(chan struct{}, MaxParallelRequests)
	var wg sync.WaitGroup
	for i, task := range tasks {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			errs[i] = task()
		})
	}
	wg.Wait()
	return errs
}

// MaxMessage is the CRDs' maxLength of a failure message in a status.
const MaxMessage = 1024

// Truncate cuts s to at most limit bytes, on a character boundary.
func Truncate(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
