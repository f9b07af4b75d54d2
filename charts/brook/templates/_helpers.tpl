{{/* The prefix of every name: the release name when it contains "brook", else <release>-brook. */}}
{{- define "brook.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else if contains "brook" .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-brook" .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "brook.operatorName" -}}
{{- printf "%s-operator" (include "brook.fullname" .) -}}
{{- end -}}

{{- define "brook.rackClusterRole" -}}
{{- printf "%s-broker-rack" (include "brook.fullname" .) -}}
{{- end -}}

{{- define "brook.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "brook.operatorName" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "brook.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "brook.labels" -}}
app.kubernetes.io/part-of: brook
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "brook.operatorSelector" -}}
app.kubernetes.io/name: brook-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "brook.etcdName" -}}
{{- printf "%s-etcd" (include "brook.fullname" .) -}}
{{- end -}}

{{- define "brook.etcdSelector" -}}
app.kubernetes.io/name: brook-etcd
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Client URLs of the chart's etcd members, comma-separated. */}}
{{- define "brook.etcdEndpoints" -}}
{{- $name := include "brook.etcdName" . -}}
{{- $ns := .Release.Namespace -}}
{{- $eps := list -}}
{{- range $i := until (int .Values.etcd.replicas) -}}
{{- $eps = append $eps (printf "http://%s-%d.%s.%s.svc:2379" $name $i $name $ns) -}}
{{- end -}}
{{- join "," $eps -}}
{{- end -}}
