{{/* Names, labels and the values derived from several others. */}}

{{- define "tidegate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "tidegate.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "tidegate.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "tidegate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tidegate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end -}}

{{- define "tidegate.labels" -}}
helm.sh/chart: {{ include "tidegate.chart" . }}
{{ include "tidegate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: tidegate
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "tidegate.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "tidegate.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "tidegate.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end -}}
{{- end -}}

{{- define "tidegate.electionID" -}}
{{- default (printf "%s-leader" (include "tidegate.fullname" .)) .Values.controller.electionID -}}
{{- end -}}

{{/* The namespace watched in scope mode. */}}
{{- define "tidegate.watchNamespace" -}}
{{- default .Release.Namespace .Values.controller.scope.namespace -}}
{{- end -}}

{{/* NAMESPACE/NAME of the Service whose addresses go into the Ingress status; "" for none. */}}
{{- define "tidegate.publishServicePath" -}}
{{- if .Values.controller.publishService.enabled -}}
{{- if .Values.controller.publishService.pathOverride -}}
{{- .Values.controller.publishService.pathOverride -}}
{{- else if .Values.service.enabled -}}
{{- printf "%s/%s" .Release.Namespace (include "tidegate.fullname" .) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The lowest data-plane port below 1024 ("" when none): NET_BIND_SERVICE and the sysctl. */}}
{{- define "tidegate.privilegedPort" -}}
{{- $low := 1024 -}}
{{- range $p := list .Values.dataplane.containerPorts.http .Values.dataplane.containerPorts.https .Values.dataplane.admin.port -}}
{{- if lt (int $p) $low -}}{{- $low = int $p -}}{{- end -}}
{{- end -}}
{{- if lt $low 1024 -}}{{- $low -}}{{- end -}}
{{- end -}}

{{- define "tidegate.drainGrace" -}}
{{- if kindIs "invalid" .Values.terminationGracePeriodSeconds -}}
{{- add (int .Values.dataplane.drainTimeout) (int .Values.dataplane.preStopSleepSeconds) 15 -}}
{{- else -}}
{{- int .Values.terminationGracePeriodSeconds -}}
{{- end -}}
{{- end -}}

{{/* extraArgs: {flag: value} -> --flag=value, --flag for "" or true; sorted by flag name. */}}
{{- define "tidegate.extraArgs" -}}
{{- range $flag, $value := . }}
{{- if or (kindIs "invalid" $value) (eq (toString $value) "") (and (kindIs "bool" $value) $value) }}
- --{{ $flag }}
{{- else }}
{{- /* values files give numbers as float64: 2097152 must not print as 2.097152e+06 */}}
{{- $v := $value }}
{{- if and (kindIs "float64" $value) (eq $value (float64 (int64 $value))) }}{{- $v = int64 $value }}{{- end }}
- {{ printf "--%s=%v" $flag $v | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The restrictive container securityContext, merged with the container's own value. */}}
{{- define "tidegate.containerSecurityContext" -}}
{{- $own := index . 0 -}}
{{- $addBind := index . 1 -}}
{{- $caps := dict "drop" (list "ALL") -}}
{{- if $addBind -}}{{- $_ := set $caps "add" (list "NET_BIND_SERVICE") -}}{{- end -}}
{{- $base := dict "runAsNonRoot" true "allowPrivilegeEscalation" false "readOnlyRootFilesystem" true "capabilities" $caps "seccompProfile" (dict "type" "RuntimeDefault") -}}
{{- /* a shallow override, key by key: mergeOverwrite would ignore an explicit false */ -}}
{{- range $k, $v := $own -}}{{- $_ := set $base $k $v -}}{{- end -}}
{{- toYaml $base -}}
{{- end -}}
