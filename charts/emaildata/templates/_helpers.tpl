{{/* The prefix of every object name (config/default's namePrefix emaildata-). */}}
{{- define "emaildata.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Labels of every object; the selector labels stay those of config/ (selectors are immutable). */}}
{{- define "emaildata.labels" -}}
app.kubernetes.io/name: emaildata
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* An image reference: repository@digest when a digest is given, else repository:tag. */}}
{{- define "emaildata.imageRef" -}}
{{- if .digest -}}
{{- if not (regexMatch "^(sha256:[a-f0-9]{64}|sha512:[a-f0-9]{128})$" (toString .digest)) -}}
{{- fail (printf "%s: %q is not a digest: want sha256:<64 lowercase hex digits> (or sha512:<128>)" .what .digest) -}}
{{- end -}}
{{- printf "%s@%s" .repository .digest -}}
{{- else -}}
{{- printf "%s:%s" .repository (toString .tag) -}}
{{- end -}}
{{- end -}}

{{- define "emaildata.image" -}}
{{- include "emaildata.imageRef" (dict "what" "image.digest" "repository" .Values.image.repository "tag" .Values.image.tag "digest" .Values.image.digest) -}}
{{- end -}}

{{/* The workers' image: worker.image over image; image's digest only for image's repository. */}}
{{- define "emaildata.workerImage" -}}
{{- $w := .Values.worker.image -}}
{{- $ref := dict "what" "worker.image.digest" "repository" (default .Values.image.repository $w.repository) "tag" .Values.image.tag "digest" "" -}}
{{- if $w.digest -}}
{{- $_ := set $ref "digest" $w.digest -}}
{{- else if $w.tag -}}
{{- $_ := set $ref "tag" $w.tag -}}
{{- else if not $w.repository -}}
{{- $_ := set $ref "digest" .Values.image.digest -}}
{{- $_ := set $ref "what" "image.digest" -}}
{{- end -}}
{{- include "emaildata.imageRef" $ref -}}
{{- end -}}

{{/* The workers' pull policy (the manager's --worker-image-pull-policy). */}}
{{- define "emaildata.workerPullPolicy" -}}
{{- $p := default .Values.image.pullPolicy .Values.worker.image.pullPolicy -}}
{{- if not (has $p (list "Always" "IfNotPresent" "Never")) -}}
{{- fail (printf "worker pull policy %q (worker.image.pullPolicy, else image.pullPolicy): want Always, IfNotPresent or Never" $p) -}}
{{- end -}}
{{- $p -}}
{{- end -}}

{{/* Whether the store is a file:// store on a PVC. */}}
{{- define "emaildata.filestore" -}}
{{- if hasPrefix "file://" .Values.store.url }}true{{ end -}}
{{- end -}}

{{- define "emaildata.claimName" -}}
{{- default (printf "%s-store" (include "emaildata.fullname" .)) .Values.store.pvc.existingClaim -}}
{{- end -}}

{{/* The pod security context both Deployments share (values podSecurityContext). */}}
{{- define "emaildata.podSecurityContext" -}}
{{- toYaml .Values.podSecurityContext -}}
{{- end -}}

{{- define "emaildata.containerSecurityContext" -}}
{{- toYaml .Values.containerSecurityContext -}}
{{- end -}}

{{/* Volumes shared by the manager and the API: the lists ConfigMap and the store claim. */}}
{{- define "emaildata.volumes" -}}
- name: lists
  configMap:
    name: {{ .Values.listsConfigMap }}
    optional: true
- name: config
  configMap:
    name: {{ include "emaildata.fullname" . }}-config
{{- if include "emaildata.filestore" . }}
- name: store
  persistentVolumeClaim:
    claimName: {{ include "emaildata.claimName" . }}
{{- end }}
{{- end -}}

{{- define "emaildata.volumeMounts" -}}
{{- if include "emaildata.filestore" . }}
- name: store
  mountPath: {{ .Values.store.mountPath }}
{{- end }}
- name: lists
  mountPath: /etc/emaildata/lists
  readOnly: true
- name: config
  mountPath: /etc/emaildata/config
  readOnly: true
{{- end -}}

{{/* Pod placement of a Deployment: call with (dict "v" .Values.manager). */}}
{{- define "emaildata.placement" -}}
{{- with .v.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .v.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .v.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .v.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- end -}}

{{/* Who may scrape the metrics ports: networkPolicy.metricsFrom, else the Prometheus pods networkPolicy.scrapers names. */}}
{{- define "emaildata.metricsFrom" -}}
{{- $np := .Values.networkPolicy -}}
{{- if $np.metricsFrom -}}
{{- toYaml $np.metricsFrom -}}
{{- else -}}
{{- if not $np.scrapers.namespace -}}
{{- fail "networkPolicy.scrapers.namespace is empty: name the namespace Prometheus runs in, or give networkPolicy.metricsFrom" -}}
{{- end -}}
- namespaceSelector:
    matchLabels:
      kubernetes.io/metadata.name: {{ $np.scrapers.namespace }}
  {{- with $np.scrapers.podLabels }}
  podSelector:
    matchLabels:
      {{- toYaml . | nindent 6 }}
  {{- end }}
{{- end -}}
{{- end -}}

{{/* The Secret holding the token the ServiceMonitor sends the manager. */}}
{{- define "emaildata.scraperTokenSecret" -}}
{{- default (printf "%s-metrics-scraper-token" (include "emaildata.fullname" .)) .Values.serviceMonitor.authorization.credentials.name -}}
{{- end -}}

{{/* ---- Per-installation names, installation secrets and watched namespaces (docs/install.md) ---- */}}

{{/* The selector label that tells this release's pods from another's. */}}
{{- define "emaildata.instanceSelector" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The list ID counter ConfigMap, in the release namespace. */}}
{{- define "emaildata.listIDConfigMap" -}}
{{- printf "%s-list-ids" (include "emaildata.fullname" .) -}}
{{- end -}}

{{/* The leader election Lease, in the release namespace. */}}
{{- define "emaildata.leaderElectionID" -}}
{{- printf "%s-manager.lists.emaildata.io" (include "emaildata.fullname" .) -}}
{{- end -}}

{{/* The installation secrets (internal/platform/installsecret): kind, value key,
     Secret name (existingSecret or <fullname>-<suffix>), whether the installer brings it.
     Returns a YAML list; the suffixes are installsecret.Specs'. The chart renders
     none of them: the manager makes them (no random value in a manifest, so a
     GitOps tool re-rendering the chart changes no key). */}}
{{- define "emaildata.installationSecrets" -}}
{{- $fullname := include "emaildata.fullname" . -}}
{{- $v := .Values.installationSecrets -}}
{{- if and .Values.history .Values.history.existingSecret -}}
{{- fail "history.existingSecret moved to installationSecrets.historyKey.existingSecret (the Secret may keep its field HISTORY_KEY; docs/install.md, \"Installation secrets\")" -}}
{{- end -}}
- kind: list-id-key
  name: {{ default (printf "%s-list-ids-key" $fullname) $v.listIDKey.existingSecret }}
  external: {{ not (empty $v.listIDKey.existingSecret) }}
- kind: callback-signing
  name: {{ default (printf "%s-callback-signing" $fullname) $v.callbackSigning.existingSecret }}
  external: {{ not (empty $v.callbackSigning.existingSecret) }}
- kind: history-key
  name: {{ default (printf "%s-history-key" $fullname) $v.historyKey.existingSecret }}
  external: {{ not (empty $v.historyKey.existingSecret) }}
- kind: fraud-history-key
  name: {{ default (printf "%s-fraud-history-key" $fullname) $v.fraudHistoryKey.existingSecret }}
  external: {{ not (empty $v.fraudHistoryKey.existingSecret) }}
{{- end -}}

{{/* The namespace of the API key Secrets. */}}
{{- define "emaildata.apiKeyNamespace" -}}
{{- if .Values.apiKeys.namespace -}}
{{- .Values.apiKeys.namespace -}}
{{- else -}}
{{- /* Per release: two releases in one namespace get two. Never cut short
       (a shortened name could be another release's). */ -}}
{{- $n := printf "%s-%s-keys" .Release.Namespace .Release.Name -}}
{{- if gt (len $n) 63 -}}
{{- fail (printf "the API key namespace %q would be longer than 63 characters: set apiKeys.namespace" $n) -}}
{{- end -}}
{{- $n -}}
{{- end -}}
{{- end -}}

{{/* What this release reconciles, as recorded on its manager's ClusterRoleBinding
     ("*": every namespace) and read by templates/guard.yaml. */}}
{{- define "emaildata.watchAnnotation" -}}
{{- if .Values.watchNamespaces -}}
{{- join "," (uniq .Values.watchNamespaces) -}}
{{- else -}}
*
{{- end -}}
{{- end -}}
