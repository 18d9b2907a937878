package configmapsync

import (
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// AllowedNamespacesAnnotation is the source's consent: where copies may go.
const AllowedNamespacesAnnotation = "sync.opsuite.dev/allowed-namespaces"

// Matches tells whether value equals one of the patterns, "*" in a pattern matching any run
// of characters and nothing else special (anchored globs, as opsuite's consent.matches).
func Matches(patterns []string, value string) bool {
	for _, pattern := range patterns {
		parts := strings.Split(pattern, "*")
		for i, part := range parts {
			parts[i] = regexp.QuoteMeta(part)
		}
		if regexp.MustCompile("^(?:" + strings.Join(parts, ".*") + ")$").MatchString(value) {
			return true
		}
	}
	return false
}

// AllowedNamespaces are the patterns of the source's consent annotation; ok is false when it
// has none (no consent at all: nothing is copied, existing copies are kept as they are).
func AllowedNamespaces(source *corev1.ConfigMap) (patterns []string, ok bool) {
	value, ok := source.Annotations[AllowedNamespacesAnnotation]
	if !ok {
		return nil, false
	}
	for _, part := range strings.Split(value, ",") {
		if part = strings.TrimSpace(part); part != "" {
			patterns = append(patterns, part)
		}
	}
	return patterns, true
}
