#!/usr/bin/env bash
# Build the pinned Go tools (control plane, kwok, helm, ...) from the wrapper modules under
# hack/tools/<name>/ and link them into .local/bin. Binaries are cached outside the work tree in
# a directory keyed by tool name and a hash of the wrapper module's go.mod/go.sum, so a second
# run on the same machine only re-links. Usage: hack/build-tools.sh [name ...] (default: all).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cache_root="${OPSUITE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/opsuite}/tools"
# One Go for every tool, here and in every workflow (their setup-go steps read the same file):
# a go command of another version fetches this one through the module proxy.
export GOTOOLCHAIN="go$(<"$root/.go-version")"
bin_dir="$root/.local/bin"
mkdir -p "$bin_dir" "$cache_root"

# name | packages built | extra ldflags | environment
kube_version="v1.36.3"
kube_ldflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  kube_ldflags+=" -X $pkg.gitVersion=$kube_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=36"
  kube_ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

tool_packages() {
  case "$1" in
    kubernetes) echo "k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy" ;;
    containerd) echo "github.com/containerd/containerd/v2/cmd/containerd github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 github.com/containerd/containerd/v2/cmd/ctr" ;;
    runc) echo "github.com/opencontainers/runc" ;;
    buildkit) echo "github.com/moby/buildkit/cmd/buildkitd github.com/moby/buildkit/cmd/buildctl" ;;
    etcd) echo "go.etcd.io/etcd/server/v3 go.etcd.io/etcd/etcdctl/v3" ;;
    kwok) echo "sigs.k8s.io/kwok/cmd/kwok" ;;
    helm) echo "helm.sh/helm/v3/cmd/helm" ;;
    actionlint) echo "github.com/rhysd/actionlint/cmd/actionlint" ;;
    opm) echo "github.com/operator-framework/operator-registry/cmd/opm" ;;
    olm) echo "github.com/operator-framework/operator-lifecycle-manager/cmd/olm github.com/operator-framework/operator-lifecycle-manager/cmd/catalog github.com/operator-framework/operator-lifecycle-manager/util/cpb github.com/operator-framework/operator-lifecycle-manager/cmd/package-server" ;;
    registry) echo "github.com/distribution/distribution/v3/cmd/registry" ;;
    coredns) echo "github.com/coredns/coredns" ;;
    grpc-health-probe) echo "github.com/grpc-ecosystem/grpc-health-probe" ;;
    bundle-validate) echo "opsuite.dev/hack/tools/bundle-validate" ;;
    argocd-health) echo "opsuite.dev/hack/tools/argocd-health" ;;
    promtool) echo "github.com/prometheus/prometheus/cmd/promtool" ;;
    kube-score) echo "github.com/zegl/kube-score/cmd/kube-score" ;;
    operator-sdk) echo "github.com/operator-framework/operator-sdk/cmd/operator-sdk github.com/operator-framework/operator-sdk/images/scorecard-test" ;;
    *) echo "unknown tool $1" >&2; return 1 ;;
  esac
}

# As helm's Makefile: its version, and the Kubernetes version `helm template` and `helm lint`
# assume without a cluster (client-go's minor version; without it Helm says v1.20.0, and a
# chart's kubeVersion guard fails where a released helm passes).
helm_ldflags() {
  local mod="$root/hack/tools/helm/go.mod" minor
  minor="$(awk '$1=="k8s.io/client-go"{split($2, v, "."); print v[2]}' "$mod")"
  printf -- '-X helm.sh/helm/v3/internal/version.version=%s' \
    "$(awk '{sub(/^require /, "")} $1=="helm.sh/helm/v3"{print $2}' "$mod")"
  printf -- ' -X helm.sh/helm/v3/internal/version.gitTreeState=clean'
  for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
    printf -- ' -X %s.k8sVersionMajor=1 -X %s.k8sVersionMinor=%s' "$pkg" "$pkg" "$minor"
  done
}

# kube-score's version, as its release builds set it (`kube-score version` says "development"
# without it).
kube_score_ldflags() {
  printf -- '-X main.version=%s' \
    "$(awk '{sub(/^require /, "")} $1=="github.com/zegl/kube-score"{print $2}' "$root/hack/tools/kube-score/go.mod")"
}

tool_ldflags() {
  case "$1" in
    kubernetes) echo "$kube_ldflags" ;;
    helm) helm_ldflags ;;
    kube-score) kube_score_ldflags ;;
    *) echo "" ;;
  esac
}

# kwok refuses to start without stages; take the ones kwokctl uses from the pinned module:
# node initialise + lease heartbeat, pods Ready, Job pods complete, deleted pods removed.
collect_kwok_stages() {
  local mod_dir="$1" out="$2" src
  src="$("$root/hack/module-dir.sh" "$mod_dir" sigs.k8s.io/kwok)/kustomize/stage"
  for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
    pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
    cat "$src/$f"; echo "---"
  done > "$out/kwok-stages.yaml"
}

# opm, the bundle validators, OLM and operator-sdk pull in containers/image, whose GPG signing
# needs cgo unless built with its pure-Go OpenPGP implementation. opm's sqlite index support needs
# cgo too; this build leaves it out (file-based catalogs only, which is what `opm validate` checks).
tool_tags() {
  case "$1" in
    opm | olm | bundle-validate | operator-sdk) echo "containers_image_openpgp" ;;
    containerd) echo "no_btrfs,no_devmapper,no_zfs" ;;
    runc) echo "seccomp" ;;
    *) echo "" ;;
  esac
}

# runc filters system calls with libseccomp (Debian's libseccomp-dev), so it needs cgo; every
# other tool is a static pure-Go binary.
tool_cgo() {
  case "$1" in
    runc) echo 1 ;;
    *) echo 0 ;;
  esac
}

build_tool() {
  local name="$1" mod_dir="$root/hack/tools/$1"
  local key
  # The module (and the main.go of a tool of our own), the Go and the build recipe: a changed
  # flag or package list builds again.
  key="$({ cat "$mod_dir/go.mod" "$mod_dir/go.sum"; cat "$mod_dir/main.go" 2>/dev/null || true
    echo "$GOTOOLCHAIN"
    echo "$(tool_packages "$name")|$(tool_ldflags "$name")|$(tool_tags "$name")|$(tool_cgo "$name")"
  } | sha256sum | cut -c1-16)"
  local out="$cache_root/$name-$key"
  if [[ ! -f "$out/.complete" ]]; then
    echo ">> building $name (cache $out)"
    local start=$SECONDS tmp="$out.tmp.$$"
    rm -rf "$tmp"; mkdir -p "$tmp"
    # shellcheck disable=SC2046
    (cd "$mod_dir" && CGO_ENABLED="$(tool_cgo "$name")" go build -trimpath -tags "$(tool_tags "$name")" \
      -ldflags "-s -w $(tool_ldflags "$name")" -o "$tmp/" $(tool_packages "$name"))
    # go names the etcd main package after its module path (".../server/v3" -> "server").
    if [[ -f "$tmp/server" ]]; then mv "$tmp/server" "$tmp/etcd"; fi
    if [[ "$name" == kwok ]]; then collect_kwok_stages "$mod_dir" "$tmp"; fi
    touch "$tmp/.complete"
    rm -rf "$out"; mv "$tmp" "$out"
    echo ">> built $name in $((SECONDS - start)) s"
  fi
  local f
  for f in "$out"/*; do
    [[ -x "$f" ]] || continue
    ln -sf "$f" "$bin_dir/$(basename "$f")"
  done
}

command -v go >/dev/null || { echo "go is required (hack/install-deps.sh installs it)" >&2; exit 1; }
tools=("$@")
[[ ${#tools[@]} -gt 0 ]] || tools=(etcd kwok kubernetes containerd runc buildkit helm actionlint opm bundle-validate olm registry coredns grpc-health-probe argocd-health promtool kube-score)
for t in "${tools[@]}"; do build_tool "$t"; done
