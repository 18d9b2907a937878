package configmapsync

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestMatchesAnchoredGlobs(t *testing.T) {
	cases := []struct {
		patterns []string
		value    string
		want     bool
	}{
		{[]string{"team"}, "team", true},
		{[]string{"team"}, "my-team", false},
		{[]string{"team"}, "team-a", false},
		{[]string{"team-*"}, "team-a", true},
		{[]string{"team-*"}, "team-", true},
		{[]string{"team-*"}, "my-team-a", false},
		{[]string{"*"}, "anything", true},
		{[]string{"a.b"}, "axb", false},
		{[]string{"*-prod"}, "shop-prod", true},
		{[]string{"x", "shop-*"}, "shop-1", true},
		{nil, "x", false},
	}
	for _, c := range cases {
		if got := Matches(c.patterns, c.value); got != c.want {
			t.Errorf("Matches(%q, %q) = %v, want %v", c.patterns, c.value, got, c.want)
		}
	}
}

func TestAllowedNamespacesReadsTheAnnotation(t *testing.T) {
	cm := &corev1.ConfigMap{}
	if _, ok := AllowedNamespaces(cm); ok {
		t.Error("no annotation is no consent")
	}
	cm.ObjectMeta = metav1.ObjectMeta{Annotations: map[string]string{AllowedNamespacesAnnotation: " a , b-*,,"}}
	patterns, ok := AllowedNamespaces(cm)
	if !ok || len(patterns) != 2 || patterns[0] != "a" || patterns[1] != "b-*" {
		t.Errorf("got %q %v", patterns, ok)
	}
	cm.Annotations[AllowedNamespacesAnnotation] = ""
	if patterns, ok := AllowedNamespaces(cm); !ok || len(patterns) != 0 {
		t.Errorf("an empty value is consent to nothing, got %q %v", patterns, ok)
	}
}
