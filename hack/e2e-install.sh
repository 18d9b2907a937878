#!/usr/bin/env bash
# Install the three charts as the in-cluster operators of the e2e suite (E2E_OPERATORS=in-cluster):
# each image is <image-prefix>/<chart>:<tag>, already on the nodes (hack/e2e-in-cluster.sh load),
# so it is never pulled. The values are the ones the e2e tests expect of every operator: debug
# logs, PodDebugger's allowed image prefix busybox, the cluster-wide admission policies off
# (the policy tests bind their own copies to their namespaces), no users' roles (aggregated into
# the built-in roles they would change what every view or edit user may do; e2e/test_user_roles.py
# applies its own), and plain-HTTP metrics: the suite reads them through the API server's service
# and pod proxies, which never pass the caller's token on (e2e/test_metrics_security.py checks the
# charts' default, secure metrics). The namespace enforces Pod Security "restricted". On the local
# plane the operator pods go to its real node (the one labelled opsuite.dev/real-node=true,
# tainted so that nothing else lands there by chance). The operators run as OpenShift's
# restricted-v2 runs them: a uid from the namespace's range, not the image's, and group 0.
#
# Usage: hack/e2e-install.sh <image-prefix> <tag>
# Environment: HELM (default helm), E2E_NAMESPACE (default opsuite-system), E2E_RELEASE_PREFIX
# (default none: each release is named like its chart, as the suite's in-cluster handles expect),
# CHARTS_DIR (default charts/: the charts of this tree; the upgrade test installs the previous
# release's from opsuite_packaging/previous_release.py first).
# .github/workflows/e2e.yaml runs this script; e2e/test_workflow_install.py runs it on the local
# plane.
set -euo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 <image-prefix> <tag>" >&2
  exit 2
fi
prefix="$1" tag="$2"
root="$(cd "$(dirname "$0")/.." && pwd)"
helm="${HELM:-helm}"
namespace="${E2E_NAMESPACE:-opsuite-system}"
kubectl="${KUBECTL:-kubectl}"

"$kubectl" create namespace "$namespace" --dry-run=client -o yaml | "$kubectl" apply -f - >/dev/null
"$kubectl" label namespace "$namespace" --overwrite \
  pod-security.kubernetes.io/enforce=restricted pod-security.kubernetes.io/enforce-version=latest
placement=()
if [[ -n "$("$kubectl" get nodes -l opsuite.dev/real-node=true -o name)" ]]; then
  placement=(--set-string 'nodeSelector.opsuite\.dev/real-node=true'
    --set 'tolerations[0].key=opsuite.dev/real-node' --set 'tolerations[0].operator=Equal'
    --set-string 'tolerations[0].value=true' --set 'tolerations[0].effect=NoSchedule')
fi

for chart in $(python3 "$root/shared/opsuite_packaging/operators.py" charts); do
  values=(--set admissionPolicy.enabled=false)
  case "$chart" in
    pod-debugger-operator)
      # Without the cluster-wide policies (other runs share the cluster) the operator must be
      # told to act anyway (e2e/test_poddebugger_security.py tests it without).
      values=(--set admissionPolicy.enabled=false --set imageAllowlist.enabled=false
        --set 'imageAllowlist.prefixes={busybox}' --set allowWithoutAdmissionPolicy=true) ;;
  esac
  "$helm" upgrade --install "${E2E_RELEASE_PREFIX:-}$chart" "${CHARTS_DIR:-$root/charts}/$chart" \
    --namespace "$namespace" "${placement[@]}" \
    --set image.repository="$prefix/$chart" --set image.tag="$tag" --set image.pullPolicy=Never \
    --set logLevel=debug --set logFormat=text --set metrics.secure=false \
    --set podSecurityContext.runAsUser=1000680000 --set podSecurityContext.runAsGroup=0 \
    --set userRoles.create=false "${values[@]}" \
    --wait --timeout 5m
done
