#!/usr/bin/env bash
# The in-cluster e2e run (E2E_OPERATORS=in-cluster), one step per call, in the order both
# .github/workflows/e2e.yaml (kind) and `make e2e-in-cluster` (the local plane's real node) run:
#
#   hack/e2e-in-cluster.sh load      put the operator images <prefix>/<chart>:<tag> on the nodes:
#                                    `kind load docker-image` when KIND_CLUSTER is set, else the
#                                    OCI archives of `make images` into the real node's containerd
#   hack/e2e-in-cluster.sh install-previous
#                                    a first install of the previous release of the three charts
#                                    (opsuite_packaging/previous_release.py: an older version and older CRDs)
#                                    with those images; the operators' CRDs an earlier e2e phase
#                                    left are removed first (once no custom resource is left), so
#                                    that Helm creates them as on a user's first install
#   hack/e2e-in-cluster.sh upgrade   the Helm upgrade to this tree's charts under load, the CRDs
#                                    first, as the charts' READMEs say (e2e/test_helm_upgrade.py)
#   hack/e2e-in-cluster.sh install   helm install (or upgrade) of this tree's three charts with
#                                    those images (hack/e2e-install.sh)
#   hack/e2e-in-cluster.sh test      the e2e suite against the operators the charts run
#                                    (E2E_MARKERS, default: not chaos, helm_upgrade nor
#                                    plain_install)
#   hack/e2e-in-cluster.sh uninstall the three releases (make e2e-in-cluster, after a pass, so a
#                                    later run with local operators has the cluster to itself)
#   hack/e2e-in-cluster.sh plain     no release left: the operators' CRDs removed, then the plain
#                                    install (deploy/<chart>/install.yaml) with those images, its
#                                    checks, and its removal (e2e/test_plain_install.py)
#
# Environment: IMAGE_PREFIX and IMAGE_TAG (the images; defaults: what hack/images.py built),
# KUBECONFIG (default: the local plane's), KIND_CLUSTER.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export PATH="$root/.local/bin:$PATH"
export KUBECONFIG="${KUBECONFIG:-$root/.local/kubeconfig}"
read -ra charts <<<"$(python3 shared/opsuite_packaging/operators.py charts)"
read -ra crds <<<"$(python3 shared/opsuite_packaging/operators.py crds)"
built="$root/.local/images/images.json"

# The operator images hack/images.py built, as "<prefix> <tag>" (IMAGE_PREFIX/IMAGE_TAG win).
image_ref() {
  if [[ -n "${IMAGE_PREFIX:-}" && -n "${IMAGE_TAG:-}" ]]; then
    echo "$IMAGE_PREFIX $IMAGE_TAG"
    return
  fi
  [[ -f "$built" ]] || { echo "no IMAGE_PREFIX/IMAGE_TAG and no $built: run make images" >&2; exit 1; }
  python3 -c '
import json, sys
names = [i["name"] for i in json.load(open(sys.argv[1]))]
# The content tag (hack/images.py also writes :dev): a rebuilt image gets a new one, so the
# Deployments roll to it.
image = f"/{sys.argv[2]}:"
(ref,) = [n for n in names if image in n and not n.endswith(":dev")]
prefix, _, tag = ref.rpartition(image)
print(prefix, tag)' "$built" "${charts[0]}"
}

# The operators' CRDs, gone once no custom resource is left (the namespaces of the e2e tests go
# in the background, their custom resources with them): a first install creates them.
remove_crds() {
  for crd in "${crds[@]}"; do
    kubectl get crd "$crd" >/dev/null 2>&1 || continue
    for _ in $(seq 60); do
      [[ -z "$(kubectl get "$crd" -A -o name 2>/dev/null)" ]] && break
      sleep 2
    done
    if [[ -n "$(kubectl get "$crd" -A -o name)" ]]; then
      echo "$crd still has custom resources; a first install needs none:" >&2
      kubectl get "$crd" -A >&2
      exit 1
    fi
    kubectl delete crd "$crd" --wait --timeout=120s
  done
}

# The three releases, gone (none left is fine).
uninstall_releases() {
  for chart in "${charts[@]}"; do
    "${HELM:-helm}" uninstall "$chart" --namespace "${E2E_NAMESPACE:-opsuite-system}" --wait \
      --ignore-not-found
  done
}

step="${1:-}"
case "$step" in
  load)
    read -r prefix tag < <(image_ref)
    if [[ -n "${KIND_CLUSTER:-}" ]]; then
      for chart in "${charts[@]}"; do
        kind load docker-image --name "$KIND_CLUSTER" "$prefix/$chart:$tag"
      done
    else
      python3 -c '
import json, sys
print("\n".join(i["archive"] for i in json.load(open(sys.argv[1]))))' "$built" |
        sort -u | xargs python3 hack/localplane.py load
    fi
    ;;
  install-previous)
    # A first install: releases an earlier e2e phase left (its charts' identities) go first, as
    # helm upgrade would not create the previous release's CRDs.
    uninstall_releases
    remove_crds
    previous="$root/.local/previous-release/charts"
    .venv/bin/python -m opsuite_packaging.previous_release charts "$previous" >/dev/null
    read -r prefix tag < <(image_ref)
    CHARTS_DIR="$previous" hack/e2e-install.sh "$prefix" "$tag"
    ;;
  upgrade)
    E2E_OPERATORS=in-cluster E2E_KUBECONFIG="$KUBECONFIG" \
      .venv/bin/pytest e2e -m helm_upgrade -p no:kind -s
    ;;
  install)
    read -r prefix tag < <(image_ref)
    hack/e2e-install.sh "$prefix" "$tag"
    ;;
  test)
    E2E_OPERATORS=in-cluster E2E_KUBECONFIG="$KUBECONFIG" \
      .venv/bin/pytest e2e -m "${E2E_MARKERS:-not chaos and not helm_upgrade and not plain_install}" \
      -p no:kind
    ;;
  uninstall)
    uninstall_releases
    ;;
  plain)
    uninstall_releases
    remove_crds
    read -r prefix tag < <(image_ref)
    E2E_OPERATORS=in-cluster E2E_KUBECONFIG="$KUBECONFIG" E2E_IMAGE_PREFIX="$prefix" \
      E2E_IMAGE_TAG="$tag" .venv/bin/pytest e2e -m plain_install -p no:kind
    ;;
  *)
    echo "usage: $0 load|install-previous|upgrade|install|test|uninstall|plain" >&2
    exit 2
    ;;
esac
