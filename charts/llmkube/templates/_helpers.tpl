{{/* Names and labels. With the release named "llmkube", names equal manifests/ exactly. */}}
{{- define "llmkube.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "llmkube.controller" -}}{{ include "llmkube.fullname" . }}-controller{{- end -}}

{{- define "llmkube.selectorLabels" -}}
app.kubernetes.io/name: llmkube
app.kubernetes.io/component: controller
{{- end -}}

{{- define "llmkube.commonLabels" -}}
app.kubernetes.io/name: llmkube
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "llmkube.labels" -}}
{{ include "llmkube.commonLabels" . }}
app.kubernetes.io/component: controller
{{- end -}}

{{- define "llmkube.monitoringLabels" -}}
{{ include "llmkube.commonLabels" . }}
app.kubernetes.io/component: monitoring
{{- end -}}

{{- define "llmkube.managePriorityClasses" -}}
{{- $owner := .Values.priorityClasses.managedBy -}}
{{- if not (has $owner (list "chart" "controller" "none")) -}}
{{- fail (printf "priorityClasses.managedBy must be chart, controller or none, not %q" $owner) -}}
{{- end -}}
{{- if eq $owner "controller" -}}true{{- else -}}false{{- end -}}
{{- end -}}
