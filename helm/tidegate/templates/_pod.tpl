{{/*
The pod shared by the Deployment and the DaemonSet: the controller and the data plane, the control
socket in an emptyDir both mount at /run/tidegate. Every flag passed here exists in the binaries
(e2e/chart/test_chart.py compares them with `--help`).
*/}}
{{- define "tidegate.podTemplate" -}}
{{- $fullname := include "tidegate.fullname" . -}}
{{- $privileged := include "tidegate.privilegedPort" . -}}
{{- $publish := include "tidegate.publishServicePath" . -}}
{{- $ports := .Values.dataplane.containerPorts -}}
{{- $podAnnotations := dict -}}
{{- if and .Values.metrics.enabled .Values.metrics.podAnnotations -}}
{{- $_ := set $podAnnotations "prometheus.io/scrape" "true" -}}
{{- $_ := set $podAnnotations "prometheus.io/port" (toString .Values.dataplane.admin.port) -}}
{{- $_ := set $podAnnotations "prometheus.io/path" "/metrics" -}}
{{- end -}}
{{- range $k, $v := .Values.podAnnotations -}}{{- $_ := set $podAnnotations $k $v -}}{{- end -}}
metadata:
  {{- with $podAnnotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  labels:
    {{- include "tidegate.labels" . | nindent 4 }}
    {{- with .Values.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  serviceAccountName: {{ include "tidegate.serviceAccountName" . }}
  automountServiceAccountToken: {{ .Values.serviceAccount.automountServiceAccountToken }}
  terminationGracePeriodSeconds: {{ include "tidegate.drainGrace" . }}
  {{- with .Values.priorityClassName }}
  priorityClassName: {{ . | quote }}
  {{- end }}
  {{- if .Values.hostNetwork }}
  hostNetwork: true
  dnsPolicy: ClusterFirstWithHostNet
  {{- else }}
  dnsPolicy: {{ .Values.dnsPolicy }}
  {{- end }}
  {{- with .Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    {{- toYaml .Values.podSecurityContext | nindent 4 }}
    {{- if and $privileged (not .Values.hostNetwork) }}
    {{- /* Without it a non-root process cannot bind below 1024, NET_BIND_SERVICE or not: the
           capability reaches a non-root process only through file capabilities, which
           allowPrivilegeEscalation: false (no_new_privs) does not honour. */}}
    sysctls:
      - name: net.ipv4.ip_unprivileged_port_start
        value: {{ $privileged | quote }}
    {{- end }}
  containers:
    - name: controller
      image: {{ include "tidegate.image" . | quote }}
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      command:
        {{- toYaml .Values.controller.command | nindent 8 }}
      args:
        - --dataplane-socket=/run/tidegate/control.sock
        - --ingress-class={{ .Values.ingressClass.name }}
        - --controller-name={{ .Values.ingressClass.controllerValue }}
        {{- if ne .Values.gatewayClass.controllerName "tidegate.io/gateway-controller" }}
        - --gateway-controller-name={{ .Values.gatewayClass.controllerName }}
        {{- end }}
        - --election-id={{ include "tidegate.electionID" . }}
        - --election-namespace={{ .Release.Namespace }}
        {{- if .Values.controller.scope.enabled }}
        - --watch-namespace={{ include "tidegate.watchNamespace" . }}
        {{- end }}
        {{- if $publish }}
        - --publish-service={{ $publish }}
        {{- end }}
        {{- if .Values.gatewayClass.listenerPorts }}
        - --gateway-listener-ports={{ .Values.gatewayClass.listenerPorts }}
        {{- end }}
        {{- if not .Values.controller.events }}
        - --disable-events
        {{- end }}
        {{- if .Values.controller.updateStatusOnShutdown }}
        - --update-status-on-shutdown
        {{- end }}
        {{- if .Values.controller.nginxAnnotations }}
        - --nginx-annotations
        {{- end }}
        - --log-level={{ .Values.controller.logLevel }}
        {{- with .Values.controller.extraArgs }}
        {{- include "tidegate.extraArgs" . | trim | nindent 8 }}
        {{- end }}
      {{- with .Values.controller.extraEnv }}
      env:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.controller.resources }}
      resources:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      securityContext:
        {{- include "tidegate.containerSecurityContext" (list .Values.controller.securityContext false) | nindent 8 }}
      volumeMounts:
        - name: control
          mountPath: /run/tidegate
        {{- with .Values.controller.extraVolumeMounts }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    - name: dataplane
      image: {{ include "tidegate.image" . | quote }}
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      command:
        {{- toYaml .Values.dataplane.command | nindent 8 }}
      args:
        - --control-socket=/run/tidegate/control.sock
        - --http-listen={{ include "tidegate.hostPort" (list .Values.dataplane.bindAddress $ports.http) }}
        - --https-listen={{ include "tidegate.hostPort" (list .Values.dataplane.bindAddress $ports.https) }}
        {{- /* The kubelet probes, and Prometheus scrapes, the pod IP: not the binary's 127.0.0.1. */}}
        - --admin-listen={{ include "tidegate.hostPort" (list .Values.dataplane.bindAddress .Values.dataplane.admin.port) }}
        - --drain-timeout={{ .Values.dataplane.drainTimeout }}
        - --metrics={{ ternary "on" "off" .Values.metrics.enabled }}
        - --access-log={{ .Values.dataplane.accessLog }}
        {{- with .Values.dataplane.workers }}
        - --workers={{ . }}
        {{- end }}
        {{- with .Values.dataplane.trustedProxies }}
        - --trusted-proxies={{ join "," . }}
        {{- end }}
        {{- if .Values.dataplane.defaultCertificate.secretName }}
        - --default-ssl-certificate=/etc/tidegate/default-certificate/tls.crt
        - --default-ssl-key=/etc/tidegate/default-certificate/tls.key
        {{- end }}
        - --log-level={{ .Values.dataplane.logLevel }}
        {{- with .Values.dataplane.extraArgs }}
        {{- include "tidegate.extraArgs" . | trim | nindent 8 }}
        {{- end }}
      {{- with .Values.dataplane.extraEnv }}
      env:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      ports:
        - name: http
          containerPort: {{ $ports.http }}
          protocol: TCP
          {{- if .Values.dataplane.hostPort.enabled }}
          hostPort: {{ .Values.dataplane.hostPort.ports.http }}
          {{- end }}
        - name: https
          containerPort: {{ $ports.https }}
          protocol: TCP
          {{- if .Values.dataplane.hostPort.enabled }}
          hostPort: {{ .Values.dataplane.hostPort.ports.https }}
          {{- end }}
        - name: admin
          containerPort: {{ .Values.dataplane.admin.port }}
          protocol: TCP
      {{- with .Values.dataplane.livenessProbe }}
      livenessProbe:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.dataplane.readinessProbe }}
      readinessProbe:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- if gt (int .Values.dataplane.preStopSleepSeconds) 0 }}
      lifecycle:
        {{- /* Keep serving while the endpoint removal reaches kube-proxy and load balancers;
               then SIGTERM starts the data plane's drain (--drain-timeout). No shell needed. */}}
        preStop:
          sleep:
            seconds: {{ int .Values.dataplane.preStopSleepSeconds }}
      {{- end }}
      {{- with .Values.dataplane.resources }}
      resources:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      securityContext:
        {{- include "tidegate.containerSecurityContext" (list .Values.dataplane.securityContext (ne $privileged "")) | nindent 8 }}
      volumeMounts:
        - name: control
          mountPath: /run/tidegate
        {{- if .Values.dataplane.defaultCertificate.secretName }}
        - name: default-certificate
          mountPath: /etc/tidegate/default-certificate
          readOnly: true
        {{- end }}
        {{- with .Values.dataplane.extraVolumeMounts }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
  volumes:
    - name: control
      emptyDir:
        medium: Memory
        sizeLimit: 1Mi
    {{- if .Values.dataplane.defaultCertificate.secretName }}
    - name: default-certificate
      secret:
        secretName: {{ .Values.dataplane.defaultCertificate.secretName }}
    {{- end }}
    {{- with .Values.extraVolumes }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with .Values.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.topologySpreadConstraints }}
  topologySpreadConstraints:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end -}}

{{/* HOST:PORT, with brackets around an IPv6 address. */}}
{{- define "tidegate.hostPort" -}}
{{- $host := index . 0 -}}
{{- $port := index . 1 -}}
{{- if contains ":" $host -}}[{{ $host }}]:{{ $port }}{{- else -}}{{ $host }}:{{ $port }}{{- end -}}
{{- end -}}
