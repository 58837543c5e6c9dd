{{/* Object names: the release name, as "nvshare" in deploy/manifests/. */}}
{{- define "nvshare.fullname" -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Selector labels: fixed for the life of a release (a DaemonSet's
     selector cannot change on upgrade). */}}
{{- define "nvshare.selectorLabels" -}}
app.kubernetes.io/name: nvshare
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "nvshare.labels" -}}
{{ include "nvshare.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "nvshare.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- end -}}
