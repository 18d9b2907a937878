package poddebugger

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf16"

	corev1 "k8s.io/api/core/v1"

	"opsuite.dev/bench/reference/api"
)

// The container naming of opsuite's poddebugger_operator/reconcile.py, so that both give a pod
// the same container for the same PodDebugger.
const (
	containerPrefix = "pdbg-"
	hashLength      = 10
	nameHashLength  = 8
	maxName         = 63
	// NonRootUser is the uid of profile restricted when runAsUser is not given.
	NonRootUser = 65532
)

var notDNS = regexp.MustCompile(`[^a-z0-9-]`)

func hash(text string, length int) string {
	sum := sha256.Sum256([]byte(text))
	return hex.EncodeToString(sum[:])[:length]
}

// NamePrefix is pdbg-<stem>-<hash of the debugger's name>: every container of the debugger is
// named this followed by hashLength hex digits.
func NamePrefix(debugger string) string {
	room := maxName - len(containerPrefix) - 1 - nameHashLength - hashLength
	stem := notDNS.ReplaceAllString(strings.ToLower(debugger), "-")
	stem = strings.Trim(stem[:min(len(stem), room)], "-")
	if stem == "" {
		stem = "x"
	}
	return containerPrefix + stem + "-" + hash(debugger, nameHashLength)
}

// securityContext is what kubectl debug --profile sets, with runAsUser.
func securityContext(profile string, runAsUser *int64) map[string]any {
	context := map[string]any{}
	switch profile {
	case "", "restricted":
		uid := int64(NonRootUser)
		if runAsUser != nil {
			uid = *runAsUser
		}
		return map[string]any{
			"runAsNonRoot":             true,
			"runAsUser":                uid,
			"allowPrivilegeEscalation": false,
			"capabilities":             map[string]any{"drop": []string{"ALL"}},
			"seccompProfile":           map[string]any{"type": "RuntimeDefault"},
		}
	case "general":
		context["capabilities"] = map[string]any{"add": []string{"SYS_PTRACE"}}
	case "netadmin":
		context["capabilities"] = map[string]any{"add": []string{"NET_ADMIN", "NET_RAW"}}
	case "sysadmin":
		context["privileged"] = true
	}
	if runAsUser != nil {
		context["runAsUser"] = *runAsUser
	}
	if len(context) == 0 {
		return nil
	}
	return context
}

// body is the container without its name, as opsuite's _container_body renders it.
func body(spec *api.PodDebuggerSpec) map[string]any {
	out := map[string]any{"image": spec.Image}
	if len(spec.Command) > 0 {
		out["command"] = spec.Command
	}
	if len(spec.Args) > 0 {
		out["args"] = spec.Args
	}
	if len(spec.Env) > 0 {
		env := make([]map[string]string, len(spec.Env))
		for i, e := range spec.Env {
			env[i] = map[string]string{"name": e.Name, "value": e.Value}
		}
		out["env"] = env
	}
	if spec.Stdin {
		out["stdin"] = true
	}
	if spec.TTY {
		out["tty"] = true
	}
	if spec.TargetContainer != "" {
		out["targetContainerName"] = spec.TargetContainer
	}
	if context := securityContext(spec.Profile, spec.RunAsUser); context != nil {
		out["securityContext"] = context
	}
	return out
}

// pythonJSON is json.dumps(value, sort_keys=True, separators=(",", ":")): keys sorted, no
// spaces, no HTML escaping, every non-ASCII character as \uXXXX.
func pythonJSON(value any) string {
	var buf bytes.Buffer
	encoder := json.NewEncoder(&buf)
	encoder.SetEscapeHTML(false)
	if err := encoder.Encode(value); err != nil {
		panic(err) // maps of strings, numbers and booleans always encode
	}
	var out strings.Builder
	for _, r := range strings.TrimSuffix(buf.String(), "\n") {
		if r < 0x80 {
			out.WriteRune(r)
			continue
		}
		for _, unit := range utf16.Encode([]rune{r}) {
			fmt.Fprintf(&out, `\u%04x`, unit)
		}
	}
	return out.String()
}

// ContainerName is pdbg-<stem>-<name hash><spec hash>.
func ContainerName(debugger *api.PodDebugger) string {
	return NamePrefix(debugger.Name) + hash(pythonJSON(body(&debugger.Spec)), hashLength)
}

// Container is the ephemeral container a pod gets from the debugger.
func Container(debugger *api.PodDebugger) (corev1.EphemeralContainer, error) {
	raw, err := json.Marshal(body(&debugger.Spec))
	if err != nil {
		return corev1.EphemeralContainer{}, err
	}
	var container corev1.EphemeralContainer
	if err := json.Unmarshal(raw, &container); err != nil {
		return corev1.EphemeralContainer{}, err
	}
	container.Name = ContainerName(debugger)
	return container, nil
}

// ownedBy tells whether a container name is one of the debugger's, of any spec.
func ownedBy(debugger, container string) bool {
	prefix := NamePrefix(debugger)
	rest, ok := strings.CutPrefix(container, prefix)
	return ok && len(rest) == hashLength && strings.Trim(rest, "0123456789abcdef") == ""
}
