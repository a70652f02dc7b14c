{{/*
The controller's permissions, least privilege: exactly the calls controller/kube/ and
controller/status/ make (e2e/chart/test_rbac.py runs the controller with them and checks what is
refused). Reads are list+watch (the reflectors); `get` only where the controller GETs one object by
name: a Secret an Ingress starts naming, a ConfigMap a BackendTLSPolicy starts naming, the
published Service, its Lease.
*/}}

{{/* Rules on the namespaced kinds the controller watches (ClusterRole, or Role in scope mode). */}}
{{- define "tidegate.rbac.watchRules" -}}
- apiGroups: [networking.k8s.io]
  resources: [ingresses]
  verbs: [list, watch]
- apiGroups: [networking.k8s.io]
  resources: [ingresses/status]
  verbs: [patch]
- apiGroups: [""]
  resources: [services]
  verbs: [list, watch]
- apiGroups: [""]
  resources: [secrets]
  verbs: [get, list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
- apiGroups: [tidegate.io]
  resources: [substitutionrulesets]
  verbs: [list, watch]
- apiGroups: [gateway.networking.k8s.io]
  resources: [gateways, httproutes, grpcroutes, referencegrants, backendtlspolicies]
  verbs: [list, watch]
- apiGroups: [gateway.networking.k8s.io]
  resources: [gateways, httproutes, grpcroutes, backendtlspolicies]
  verbs: [get]
- apiGroups: [gateway.networking.k8s.io]
  resources: [gateways/status, httproutes/status, grpcroutes/status, backendtlspolicies/status]
  verbs: [patch]
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, list, watch]
{{- if .Values.controller.events }}
- apiGroups: [""]
  resources: [events]
  verbs: [create, patch]
{{- end }}
{{- end -}}

{{/* IngressClasses, GatewayClasses and Namespaces are cluster-scoped: a ClusterRole even in
scope mode. */}}
{{- define "tidegate.rbac.clusterRules" -}}
- apiGroups: [networking.k8s.io]
  resources: [ingressclasses]
  verbs: [list, watch]
- apiGroups: [gateway.networking.k8s.io]
  resources: [gatewayclasses]
  verbs: [get, list, watch]
- apiGroups: [gateway.networking.k8s.io]
  resources: [gatewayclasses/status]
  verbs: [patch]
- apiGroups: [""]
  resources: [namespaces]
  verbs: [list, watch]
{{- end -}}

{{/* The Lease of the leader election, in the release namespace (--election-namespace). */}}
{{- define "tidegate.rbac.leaseRules" -}}
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [create]
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  resourceNames: [{{ include "tidegate.electionID" . }}]
  verbs: [get, update]
{{- end -}}

{{/* --publish-service: the controller GETs that one Service every 2 s. With
       --gateway-listener-ports it also keeps one Service per Gateway in that namespace (their
       names are made from the Gateways', so they cannot be listed here). */}}
{{- define "tidegate.rbac.publishRules" -}}
{{- $path := include "tidegate.publishServicePath" . -}}
- apiGroups: [""]
  resources: [services]
  resourceNames: [{{ last (splitList "/" $path) }}]
  verbs: [get]
{{- if .Values.gatewayClass.listenerPorts }}
- apiGroups: [""]
  resources: [services]
  verbs: [get, list, create, patch, delete]
{{- end }}
{{- end -}}
