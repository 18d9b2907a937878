package poddebugger

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"opsuite.dev/bench/reference/api"
)

func ptr[T any](v T) *T { return &v }

// The expected names are what opsuite's poddebugger_operator.reconcile.container_name gives
// for the same PodDebuggers (computed with it once, then written here).
func TestContainerNameIsOpsuites(t *testing.T) {
	long := "A.Very.Long.Debugger.Name.That.Goes.On.And.On.Beyond.Limits"
	cases := []struct {
		name, want string
		spec       api.PodDebuggerSpec
	}{
		{"shell", "pdbg-shell-ce635c4eee4f01367c",
			api.PodDebuggerSpec{Image: "busybox:1.37", Command: []string{"sleep", "3600"}}},
		{long, "pdbg-a-very-long-debugger-name-that-goes-on-a5a5273fee4f01367c",
			api.PodDebuggerSpec{Image: "busybox:1.37", Command: []string{"sleep", "3600"}, Profile: "restricted"}},
		{"shell", "pdbg-shell-ce635c4e5053a1d871", api.PodDebuggerSpec{
			Image: "reg.example.com/dbg<x>&:1", Args: []string{"-c", "é ☃ 😀"},
			Env: []api.EnvVar{{Name: "A", Value: "1"}}, Stdin: true, TTY: true, TargetContainer: "main",
			Profile: "netadmin", RunAsUser: ptr(int64(0)), MaxPods: ptr(int32(10))}},
		{"shell", "pdbg-shell-ce635c4e33362def47", api.PodDebuggerSpec{Image: "alpine", Profile: "baseline"}},
		{"shell", "pdbg-shell-ce635c4eaf566fc431",
			api.PodDebuggerSpec{Image: "alpine", Profile: "general", RunAsUser: ptr(int64(1000))}},
		{"shell", "pdbg-shell-ce635c4e165ef4ec8e", api.PodDebuggerSpec{Image: "alpine", Profile: "sysadmin"}},
		{long, "pdbg-a-very-long-debugger-name-that-goes-on-a5a5273fb8c8b0b8ac",
			api.PodDebuggerSpec{Image: "alpine", Profile: "restricted", RunAsUser: ptr(int64(1234))}},
	}
	for _, c := range cases {
		c.spec.Selector = metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}
		debugger := &api.PodDebugger{ObjectMeta: metav1.ObjectMeta{Name: c.name}, Spec: c.spec}
		if got := ContainerName(debugger); got != c.want {
			t.Errorf("%s %+v: got %s, want %s", c.name, c.spec, got, c.want)
		}
	}
}

func TestOwnedByIsExact(t *testing.T) {
	name := NamePrefix("shell") + "0123456789"
	if !ownedBy("shell", name) {
		t.Errorf("%s is shell's", name)
	}
	for _, other := range []string{
		NamePrefix("shell-admin") + "0123456789", name + "0", name[:len(name)-1], NamePrefix("shell") + "012345678g",
	} {
		if ownedBy("shell", other) {
			t.Errorf("%s is not shell's", other)
		}
	}
}

func TestContainerCarriesTheRestrictedProfile(t *testing.T) {
	debugger := &api.PodDebugger{ObjectMeta: metav1.ObjectMeta{Name: "shell"},
		Spec: api.PodDebuggerSpec{Image: "busybox", Command: []string{"sleep", "1"}}}
	c, err := Container(debugger)
	if err != nil {
		t.Fatal(err)
	}
	sc := c.SecurityContext
	if c.Image != "busybox" || len(c.Command) != 2 || sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != NonRootUser ||
		sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 {
		t.Errorf("unexpected container %+v", c)
	}
}
