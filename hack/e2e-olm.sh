#!/usr/bin/env bash
# The OLM route end to end, one step per call, in the order `make e2e-olm` runs it on the local
# plane's real node (the OLM job of .github/workflows/e2e.yaml runs subscribe, upgrade and test
# too):
#
#   hack/e2e-olm.sh publish    the OLM and operator images and two releases' bundle and catalog
#                              images (hack/olm_images.py), built without Docker, pushed to the
#                              plane's registry, which the real node's containerd takes
#                              ghcr.io/opsuite images from: the previous release (the bundles
#                              re-versioned lower, each CRD without one optional field) is the
#                              catalog's moving tag; the catalog of both waits for `upgrade`
#   hack/e2e-olm.sh install    OLM from the pinned operator-lifecycle-manager module's quickstart
#                              manifests (CRDs, olm-operator, catalog-operator, packageserver),
#                              with OLM_IMAGE standing in for upstream's images when set
#   hack/e2e-olm.sh subscribe  the PodDebugger's and PodSet's admission policies from their
#                              charts (the admin's step their docs give), then a CatalogSource serving CATALOG_IMAGE,
#                              polled every CATALOG_POLL_INTERVAL (default 15s), and a Subscription
#                              per operator in E2E_NAMESPACE (hack/olm-subscribe.sh); prints the
#                              time from the Subscriptions to Ready operator pods
#   hack/e2e-olm.sh upgrade    e2e/test_olm_upgrade.py: custom resources at work, then the catalog
#                              of both releases pushed to the same tag; OLM upgrades every
#                              operator, nothing they manage is lost; prints the time from the
#                              push to the new CSVs Succeeded and to Ready operator pods
#   hack/e2e-olm.sh test       the smoke subset against the operators OLM runs (upgraded), and
#                              the checks of what OLM grants (e2e/test_olm_roles.py)
#   hack/e2e-olm.sh uninstall  Subscriptions, CSVs, the operators' CRDs, the CatalogSource, OLM
#
# Environment: KUBECONFIG (default: the local plane's), E2E_NAMESPACE (default: operators, the
# namespace of OLM's global OperatorGroup), CATALOG_IMAGE and OLM_IMAGE (default: what publish
# pushed, from .local/images/olm/published.json, which `upgrade` reads too: E2E_OLM_PUBLISHED
# names another such file).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export PATH="$root/.local/bin:$PATH"
export KUBECONFIG="${KUBECONFIG:-$root/.local/kubeconfig}"
namespace="${E2E_NAMESPACE:-operators}"
published="${E2E_OLM_PUBLISHED:-$root/.local/images/olm/published.json}"
olm_module=github.com/operator-framework/operator-lifecycle-manager

published_image() {
  python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$published" "$1"
}

# OLM's namespaces, created first so their pods go to the real node when there is one (a field
# manager of their own: applying olm.yaml, which names the namespaces bare, as the same manager
# would take the annotations away again).
namespaces() {
  local annotations=""
  if [[ -n "$(kubectl get nodes -l opsuite.dev/real-node=true -o name)" ]]; then
    annotations='
  annotations:
    scheduler.alpha.kubernetes.io/node-selector: opsuite.dev/real-node=true
    scheduler.alpha.kubernetes.io/defaultTolerations: >-
      [{"key": "opsuite.dev/real-node", "operator": "Equal", "value": "true", "effect": "NoSchedule"}]'
  fi
  for ns in olm operators; do
    printf 'apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s%s\n---\n' "$ns" "$annotations"
  done | kubectl apply --server-side --field-manager=opsuite-olm-placement -f -
}

# The admission policies the operators' docs ask an OLM user's cluster admin to apply.
admin_policies() {
  "${HELM:-helm}" template pod-debugger-operator charts/pod-debugger-operator --namespace "$namespace" \
    --show-only templates/admission-policy.yaml --show-only templates/privileged-policy.yaml \
    --show-only templates/image-policy-writers.yaml
  echo "---"
  "${HELM:-helm}" template podset-operator charts/podset-operator --namespace "$namespace" \
    --show-only templates/admission-policy.yaml
}

step="${1:-}"
case "$step" in
  publish)
    registry="$(python3 hack/localplane.py registry)"
    .venv/bin/python hack/olm_images.py "$registry" "$published"
    ;;
  install)
    olm_dir="$(hack/module-dir.sh hack/tools/olm "$olm_module")/deploy/upstream/quickstart"
    image="${OLM_IMAGE:-}"
    if [[ -z "$image" && -f "$published" ]]; then image="$(published_image tools)"; fi
    kubectl apply --server-side -f "$olm_dir/crds.yaml"
    # olm-operator waits for its OLMConfig informer, whose CRD the quickstart's crds.yaml lacks:
    # from the operator-framework/api module OLM pins.
    api_dir="$(hack/module-dir.sh hack/tools/olm github.com/operator-framework/api)"
    kubectl apply --server-side -f "$api_dir/crds/operators.coreos.com_olmconfigs.yaml"
    kubectl wait --for=condition=Established --timeout=120s crd --all
    namespaces
    .venv/bin/python hack/olm_manifest.py "$olm_dir/olm.yaml" ${image:+--image "$image"} |
      kubectl apply --server-side -f -
    kubectl rollout status -n olm deployment/olm-operator --timeout=300s
    kubectl rollout status -n olm deployment/catalog-operator --timeout=300s
    kubectl wait -n olm --for=jsonpath='{.status.phase}'=Succeeded --timeout=300s csv/packageserver
    ;;
  subscribe)
    catalog="${CATALOG_IMAGE:-$(published_image catalog)}"
    # What docs/poddebugger.md and docs/podset.md ask an OLM user's cluster admin to do (a
    # bundle cannot carry admission policies, and the PodDebugger operator injects nothing
    # without them): apply the charts' policies, before anyone creates a custom resource.
    admin_policies | kubectl apply --server-side -f -
    start=$SECONDS
    CATALOG_POLL_INTERVAL="${CATALOG_POLL_INTERVAL:-15s}" hack/olm-subscribe.sh "$catalog" "$namespace"
    echo ">> Subscriptions to Ready operator pods (catalog pod included): $((SECONDS - start)) s"
    ;;
  upgrade)
    E2E_OPERATORS=in-cluster E2E_NAMESPACE="$namespace" E2E_KUBECONFIG="$KUBECONFIG" \
      E2E_OLM_UPGRADE="$published" .venv/bin/pytest e2e/test_olm_upgrade.py -p no:kind -s
    ;;
  test)
    E2E_OPERATORS=in-cluster E2E_NAMESPACE="$namespace" E2E_KUBECONFIG="$KUBECONFIG" E2E_OLM=1 \
      .venv/bin/pytest e2e -m "smoke or olm" -p no:kind
    ;;
  uninstall)
    # While OLM still runs: it removes its finalizers from the CSVs (and the packageserver's
    # APIService with its CSV; a stale one would stop the namespace controller, whose discovery
    # then fails, from deleting any namespace).
    kubectl delete subscriptions.operators.coreos.com --all -n "$namespace" --ignore-not-found
    kubectl delete csv --all -n "$namespace" --ignore-not-found --wait --timeout=120s
    kubectl delete catalogsource --all -n olm --ignore-not-found --wait --timeout=120s
    admin_policies | kubectl delete --ignore-not-found -f -
    kubectl delete csv packageserver -n olm --ignore-not-found --wait --timeout=120s
    kubectl delete apiservice v1.packages.operators.coreos.com --ignore-not-found
    olm_dir="$(hack/module-dir.sh hack/tools/olm "$olm_module")/deploy/upstream/quickstart"
    .venv/bin/python hack/olm_manifest.py "$olm_dir/olm.yaml" |
      kubectl delete --ignore-not-found --wait --timeout=180s -f -
    # shellcheck disable=SC2046 # one word per CRD
    kubectl delete crd $(python3 shared/opsuite_packaging/operators.py crds) --ignore-not-found
    # What OLM leaves of the bundles once their CSVs are gone: the cluster-scoped extras (the
    # metrics-reader ClusterRoles), which would block a later helm install of the same names.
    kubectl delete clusterrole,clusterrolebinding --ignore-not-found \
      -l app.kubernetes.io/part-of=opsuite,app.kubernetes.io/managed-by=olm
    ;;
  *)
    echo "usage: $0 publish|install|subscribe|upgrade|test|uninstall" >&2
    exit 2
    ;;
esac
