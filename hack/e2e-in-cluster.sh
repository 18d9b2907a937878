#!/usr/bin/env bash
# The in-cluster e2e run (E2E_OPERATORS=in-cluster), one step per call, in the order both
# .github/workflows/e2e.yaml (kind) and `make e2e-in-cluster` (the local plane's real node) run:
#
#   hack/e2e-in-cluster.sh load      put the operator images <prefix>/<chart>:<tag> on the nodes:
#                                    `kind load docker-image` when KIND_CLUSTER is set, else the
#                                    OCI archives of `make images` into the real node's containerd
#   hack/e2e-in-cluster.sh install   helm install of the three charts with those images
#                                    (hack/e2e-install.sh)
#   hack/e2e-in-cluster.sh test      the e2e suite against the operators the charts run
#                                    (E2E_MARKERS, default "not chaos")
#   hack/e2e-in-cluster.sh uninstall the three releases (make e2e-in-cluster, after a pass, so a
#                                    later run with local operators has the cluster to itself)
#
# Environment: IMAGE_PREFIX and IMAGE_TAG (the images; defaults: what hack/images.py built),
# KUBECONFIG (default: the local plane's), KIND_CLUSTER.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export PATH="$root/.local/bin:$PATH"
export KUBECONFIG="${KUBECONFIG:-$root/.local/kubeconfig}"
charts=(podset-operator configmapsync-operator pod-debugger-operator)
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
(ref,) = [n for n in names if "/podset-operator:" in n and not n.endswith(":dev")]
prefix, _, tag = ref.rpartition("/podset-operator:")
print(prefix, tag)' "$built"
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
  install)
    read -r prefix tag < <(image_ref)
    hack/e2e-install.sh "$prefix" "$tag"
    ;;
  test)
    E2E_OPERATORS=in-cluster E2E_KUBECONFIG="$KUBECONFIG" \
      .venv/bin/pytest e2e -m "${E2E_MARKERS:-not chaos}" -p no:kind
    ;;
  uninstall)
    for chart in "${charts[@]}"; do
      "${HELM:-helm}" uninstall "$chart" --namespace "${E2E_NAMESPACE:-opsuite-system}" --wait \
        --ignore-not-found
    done
    ;;
  *)
    echo "usage: $0 load|install|test|uninstall" >&2
    exit 2
    ;;
esac
