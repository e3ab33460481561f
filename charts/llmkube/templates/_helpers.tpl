{{/* Names and labels. With the release named "llmkube", names equal manifests/ exactly. */}}
{{- define "llmkube.name" -}}
{{- .Values.nameOverride | default .Chart.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}

{{- define "llmkube.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else if contains (include "llmkube.name" .) .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "llmkube.name" .) | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "llmkube.controller" -}}{{ include "llmkube.fullname" . }}-controller{{- end -}}

{{- define "llmkube.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- .Values.serviceAccount.name | default (include "llmkube.controller" .) -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The selector stays app.kubernetes.io/name=llmkube whatever nameOverride says: a Deployment's
selector cannot change, and the controller's own tools (and PodMonitor) select on it. */}}
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
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "llmkube.labels" -}}
{{ include "llmkube.commonLabels" . }}
app.kubernetes.io/component: controller
{{- end -}}

{{- define "llmkube.monitoringLabels" -}}
{{ include "llmkube.commonLabels" . }}
app.kubernetes.io/component: monitoring
{{- with .Values.monitoring.labels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "llmkube.managePriorityClasses" -}}
{{- $owner := .Values.priorityClasses.managedBy -}}
{{- if not (has $owner (list "chart" "controller" "none")) -}}
{{- fail (printf "priorityClasses.managedBy must be chart, controller or none, not %q" $owner) -}}
{{- end -}}
{{- if eq $owner "controller" -}}true{{- else -}}false{{- end -}}
{{- end -}}

{{/* --runtime-images from the runtimeImages values that are set, in a stable order. The values are
     camelCase (llamacppCuda); the dashed names of older charts (llamacpp-cuda, the flag's own) are
     still read, and the two spellings of one image may not disagree. */}}
{{- define "llmkube.runtimeImages" -}}
{{- $flags := dict "llamacpp" "llamacpp" "llamacppCuda" "llamacpp-cuda" "llamacppRocm" "llamacpp-rocm" "llamacppVulkan" "llamacpp-vulkan" "llamacppIntel" "llamacpp-intel" "vllm" "vllm" "tgi" "tgi" -}}
{{- $images := dict -}}
{{- range $value, $flag := $flags -}}
{{- $image := index $.Values.runtimeImages $value | default "" -}}
{{- $older := index $.Values.runtimeImages $flag | default "" -}}
{{- if and $image $older (ne $image $older) -}}
{{- fail (printf "runtimeImages.%s and runtimeImages.%s (its older name) name different images: set only runtimeImages.%s" $value $flag $value) -}}
{{- end -}}
{{- with (or $image $older) -}}{{- $_ := set $images $flag . -}}{{- end -}}
{{- end -}}
{{- $pairs := list -}}
{{- range $flag := keys $images | sortAlpha -}}
{{- $pairs = append $pairs (printf "%s=%s" $flag (index $images $flag)) -}}
{{- end -}}
{{- join "," $pairs -}}
{{- end -}}

{{- /* "true" where the cluster serves the API of the admission policies (admissionregistration.k8s.io/v1
       ValidatingAdmissionPolicy, Kubernetes 1.30+; the chart's kubeVersion asks 1.35+ for the CEL libraries they use). */ -}}
{{- define "llmkube.admissionPolicyServed" -}}
{{- .Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy" -}}
{{- end -}}
