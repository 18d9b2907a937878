{{/* Chart name, or nameOverride. */}}
{{- define "pod-debugger-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name of the release's objects: fullnameOverride, or release name + chart name. */}}
{{- define "pod-debugger-operator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Recommended labels on every object. */}}
{{- define "pod-debugger-operator.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "pod-debugger-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: operator
app.kubernetes.io/part-of: opsuite
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Labels selecting the operator pods. */}}
{{- define "pod-debugger-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "pod-debugger-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The ServiceAccount the operator runs as. */}}
{{- define "pod-debugger-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "pod-debugger-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The image reference: by digest when one is given, else by tag (default: appVersion). */}}
{{- define "pod-debugger-operator.image" -}}
{{- $repository := .Values.image.repository }}
{{- /* global.imageRegistry (as Bitnami's charts take it, for a mirror): it replaces the
repository's registry, the first part when it names a host. */}}
{{- with dig "imageRegistry" "" (.Values.global | default dict) }}
{{- $parts := splitList "/" $repository }}
{{- $first := first $parts }}
{{- if and (gt (len $parts) 1) (or (contains "." $first) (contains ":" $first) (eq $first "localhost")) }}
{{- $repository = join "/" (rest $parts) }}
{{- end }}
{{- $repository = printf "%s/%s" (trimSuffix "/" .) $repository }}
{{- end }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" $repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" $repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* The operator pods' affinity: the user's, or with two or more pods a preference for
different nodes, so that one node's loss leaves a standby to take the Lease. */}}
{{- define "pod-debugger-operator.affinity" -}}
{{- if .Values.affinity }}
{{- toYaml .Values.affinity }}
{{- else if gt (int .Values.replicaCount) 1 }}
podAntiAffinity:
  preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- include "pod-debugger-operator.selectorLabels" . | nindent 12 }}
{{- end }}
{{- end }}

{{/* Refuse an install whose cluster-scoped names another release already has: two releases
named alike in two namespaces share them (fullname), and Helm's own refusal names neither the
other release nor a way out. Nothing to look up under `helm template`. */}}
{{- define "pod-debugger-operator.refuseClusterNameClash" -}}
{{- $fullname := include "pod-debugger-operator.fullname" . }}
{{- range $suffix := list "" "-metrics-reader" "-view" "-edit" }}
{{- $name := printf "%s%s" $fullname $suffix }}
{{- $found := lookup "rbac.authorization.k8s.io/v1" "ClusterRole" "" $name }}
{{- $owner := dig "metadata" "annotations" "meta.helm.sh/release-namespace" "" $found }}
{{- $release := dig "metadata" "annotations" "meta.helm.sh/release-name" "" $found }}
{{- if and $owner (or (ne $owner $.Release.Namespace) (ne $release $.Release.Name)) }}
{{- fail (printf "ClusterRole %s belongs to release %s in namespace %s: a release's cluster-scoped objects are named after it, so two releases named alike in two namespaces collide. Install under another release name, or set fullnameOverride." $name $release $owner) }}
{{- end }}
{{- end }}
{{- end }}
