//go:build envtest

// Package envtest runs the three references against a real API server (etcd and
// kube-apiserver from .local/bin, no nodes) with opsuite's CRDs: go test -tags envtest ./...
package envtest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"opsuite.dev/bench/reference/api"
	"opsuite.dev/bench/reference/internal/app"
	"opsuite.dev/bench/reference/internal/configmapsync"
	"opsuite.dev/bench/reference/internal/poddebugger"
	"opsuite.dev/bench/reference/internal/podset"
)

var (
	c          client.Client
	clientset  *kubernetes.Clientset
	kubeconfig string
	binDir     string
)

func TestMain(m *testing.M) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..", "..", "..")
	env := &envtest.Environment{
		BinaryAssetsDirectory: filepath.Join(root, ".local", "bin"),
		CRDDirectoryPaths: []string{
			filepath.Join(root, "charts", "podset-operator", "crds"),
			filepath.Join(root, "charts", "configmapsync-operator", "crds"),
			filepath.Join(root, "charts", "pod-debugger-operator", "crds"),
		},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		panic(err)
	}
	scheme := app.NewScheme(func(s *k8sruntime.Scheme) error {
		for _, add := range []func(*k8sruntime.Scheme) error{api.AddPodSet, api.AddConfigMapSync, api.AddPodDebugger} {
			if err := add(s); err != nil {
				return err
			}
		}
		return nil
	})
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		panic(err)
	}
	for _, setup := range []func(ctrl.Manager) error{
		(&podset.Reconciler{Client: mgr.GetClient(), Scheme: scheme, Recorder: app.Recorder(mgr, "podset")}).SetupWithManager,
		(&configmapsync.Reconciler{Client: mgr.GetClient(), Recorder: app.Recorder(mgr, "configmapsync")}).SetupWithManager,
		(&poddebugger.Reconciler{Client: mgr.GetClient(), Recorder: app.Recorder(mgr, "poddebugger")}).SetupWithManager,
	} {
		if err := setup(mgr); err != nil {
			panic(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		if err := mgr.Start(ctx); err != nil {
			panic(err)
		}
	}()
	c, err = client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		panic(err)
	}
	clientset = kubernetes.NewForConfigOrDie(cfg)
	binDir = filepath.Join(root, ".local", "bench-reference", "bin")
	kubeconfig, err = writeKubeconfig(env)
	if err != nil {
		panic(err)
	}
	code := m.Run()
	_ = os.Remove(kubeconfig)
	cancel()
	_ = env.Stop()
	os.Exit(code)
}

func eventually(t *testing.T, what string, check func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true,
		func(context.Context) (bool, error) { return check(), nil })
	if err != nil {
		t.Fatalf("timed out waiting for %s", what)
	}
}

func createNamespace(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}); err != nil {
		t.Fatal(err)
	}
}

func podCount(t *testing.T, ns string) int {
	var pods corev1.PodList
	if err := c.List(context.Background(), &pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	return len(pods.Items)
}

func TestPodSetScalesThroughTheScaleSubresource(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "ps", nil)
	three := int32(3)
	ps := &api.PodSet{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ps"},
		Spec: api.PodSetSpec{Replicas: &three, Template: corev1.PodTemplateSpec{
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}}}}}
	if err := c.Create(ctx, ps); err != nil {
		t.Fatal(err)
	}
	eventually(t, "3 pods", func() bool { return podCount(t, "ps") == 3 })
	eventually(t, "status.replicas 3", func() bool {
		var got api.PodSet
		return c.Get(ctx, client.ObjectKeyFromObject(ps), &got) == nil && got.Status.Replicas == 3 &&
			got.Status.Selector == "apps.opsuite.dev/podset=web" && got.Status.ObservedGeneration == got.Generation
	})
	scale := &autoscalingv1.Scale{}
	if err := c.SubResource("scale").Get(ctx, ps, scale); err != nil {
		t.Fatal(err)
	}
	if scale.Status.Replicas != 3 || scale.Status.Selector != "apps.opsuite.dev/podset=web" {
		t.Errorf("scale %+v", scale.Status)
	}
	scale.Spec.Replicas = 1
	if err := c.SubResource("scale").Update(ctx, ps, client.WithSubResourceBody(scale)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "1 pod", func() bool { return podCount(t, "ps") == 1 })
}

func TestConfigMapSyncCopiesRepairsAndCleansUp(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "src", nil)
	createNamespace(t, "dst-a", nil)
	createNamespace(t, "dst-b", map[string]string{"sync": "yes"})
	createNamespace(t, "dst-c", map[string]string{"sync": "yes"})
	source := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "src",
		Annotations: map[string]string{configmapsync.AllowedNamespacesAnnotation: "dst-a,dst-b"}},
		Data: map[string]string{"k": "v"}}
	if err := c.Create(ctx, source); err != nil {
		t.Fatal(err)
	}
	sync := &api.ConfigMapSync{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "src"},
		Spec: api.ConfigMapSyncSpec{ConfigMapName: "cfg", DestinationNamespaces: []string{"dst-a"},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"sync": "yes"}}}}
	if err := c.Create(ctx, sync); err != nil {
		t.Fatal(err)
	}
	copyIn := func(ns string) *corev1.ConfigMap {
		cm := &corev1.ConfigMap{}
		if c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "cfg"}, cm) != nil {
			return nil
		}
		return cm
	}
	eventually(t, "copies in dst-a and dst-b", func() bool {
		a, b := copyIn("dst-a"), copyIn("dst-b")
		return a != nil && b != nil && a.Data["k"] == "v" && b.Data["k"] == "v"
	})
	if copyIn("dst-c") != nil {
		t.Error("copied where the source does not consent")
	}
	eventually(t, "status", func() bool {
		var got api.ConfigMapSync
		return c.Get(ctx, client.ObjectKeyFromObject(sync), &got) == nil && got.Status.TargetNamespaces == 3 &&
			got.Status.SyncedNamespaces == 2 && got.Status.FailedNamespaces == 1 &&
			len(got.Status.FailedTargets) == 1 && got.Status.FailedTargets[0].Reason == configmapsync.NotAllowedBySource
	})
	drifted := copyIn("dst-a")
	drifted.Data["k"] = "tampered"
	if err := c.Update(ctx, drifted); err != nil {
		t.Fatal(err)
	}
	eventually(t, "drift repaired", func() bool { cm := copyIn("dst-a"); return cm != nil && cm.Data["k"] == "v" })
	if err := c.Delete(ctx, sync); err != nil {
		t.Fatal(err)
	}
	eventually(t, "copies deleted", func() bool { return copyIn("dst-a") == nil && copyIn("dst-b") == nil })
	if copyIn("src") == nil {
		t.Error("the source is gone")
	}
}

func TestPodDebuggerInjectsOnceThroughTheSubresource(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "dbg", nil)
	for _, name := range []string{"p1", "p2"} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "dbg", Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "nginx"}}}}
		if err := c.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	debugger := &api.PodDebugger{ObjectMeta: metav1.ObjectMeta{Name: "shell", Namespace: "dbg"},
		Spec: api.PodDebuggerSpec{Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Image: "busybox:1.37", Command: []string{"sleep", "3600"}}}
	if err := c.Create(ctx, debugger); err != nil {
		t.Fatal(err)
	}
	want := "pdbg-shell-ce635c4eee4f01367c"
	eventually(t, "both pods debugged", func() bool {
		for _, name := range []string{"p1", "p2"} {
			pod, err := clientset.CoreV1().Pods("dbg").Get(ctx, name, metav1.GetOptions{})
			if err != nil || len(pod.Spec.EphemeralContainers) != 1 || pod.Spec.EphemeralContainers[0].Name != want {
				return false
			}
		}
		return true
	})
	eventually(t, "status", func() bool {
		var got api.PodDebugger
		return c.Get(ctx, client.ObjectKeyFromObject(debugger), &got) == nil && got.Status.MatchedPods == 2 &&
			got.Status.DebuggedCount == 2 && got.Status.DebuggedPodsTotal == 2
	})
	// A pod change wakes the debugger again: still one container each.
	pod, err := clientset.CoreV1().Pods("dbg").Get(ctx, "p1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Annotations = map[string]string{"touched": "yes"}
	if _, err := clientset.CoreV1().Pods("dbg").Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	for _, name := range []string{"p1", "p2"} {
		pod, err := clientset.CoreV1().Pods("dbg").Get(ctx, name, metav1.GetOptions{})
		if err != nil || len(pod.Spec.EphemeralContainers) != 1 {
			t.Errorf("pod %s: %v %d containers", name, err, len(pod.Spec.EphemeralContainers))
		}
	}
}

// writeKubeconfig writes an admin kubeconfig of the test API server to a temporary file.
func writeKubeconfig(env *envtest.Environment) (string, error) {
	user, err := env.AddUser(envtest.User{Name: "reference", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", err
	}
	data, err := user.KubeConfig()
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp("", "reference-kubeconfig-*")
	if err != nil {
		return "", err
	}
	defer f.Close()
	_, err = f.Write(data)
	return f.Name(), err
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// The built binaries (bench/reference/build.sh) take the kubebuilder flags and report Ready
// on /readyz once their caches have synced.
func TestBinariesStartAndBecomeReady(t *testing.T) {
	for _, name := range []string{"podset", "configmapsync", "poddebugger"} {
		for _, args := range [][]string{nil, {"--namespace", "ps"}, {"--leader-elect", "--leader-election-namespace", "default"}} {
			t.Run(fmt.Sprintf("%s%v", name, args), func(t *testing.T) {
				binary := filepath.Join(binDir, name)
				if _, err := os.Stat(binary); err != nil {
					t.Skipf("%s not built (bench/reference/build.sh)", binary)
				}
				probes := fmt.Sprintf("127.0.0.1:%d", freePort(t))
				cmd := exec.Command(binary, append([]string{"--kubeconfig", kubeconfig,
					"--metrics-bind-address", "0", "--health-probe-bind-address", probes}, args...)...)
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
				for _, path := range []string{"/readyz", "/healthz"} {
					eventually(t, name+path, func() bool {
						resp, err := http.Get("http://" + probes + path)
						if err != nil {
							return false
						}
						_ = resp.Body.Close()
						return resp.StatusCode == http.StatusOK
					})
				}
			})
		}
	}
}
