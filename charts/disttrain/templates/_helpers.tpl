{{/* The operator's image: registry, repository and tag (the chart's appVersion unless set). */}}
{{- define "disttrain.image" -}}
{{ .Values.image.registry }}{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* The trainer image a job's container named tensorflow runs when it names none: registry, repository, tag. */}}
{{- define "disttrain.trainerImage" -}}
{{ .Values.image.registry }}{{ .Values.trainerImage.repository }}:{{ .Values.trainerImage.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* The pull policy line of a container, when one is set. */}}
{{- define "disttrain.pullPolicy" -}}
{{- with .Values.image.pullPolicy }}
imagePullPolicy: {{ . }}
{{- end }}
{{- end -}}

{{/* Where the operator's pods (and the dashboard's) may run: the pod spec's node selector and tolerations. */}}
{{- define "disttrain.placement" -}}
{{- with .Values.operator.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.operator.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* What the operator does in the namespaces it runs jobs in, and nothing more: watch its jobs and their
pods, Services and PVCs; create (and, for restarts and cleanup, delete) pods; keep each pod's log in a
ConfigMap before letting it go; report through status and Events; create PodGroups and Kueue Workloads
where those are used. Trainer pods need no rights at all. */}}
{{- define "disttrain.jobRules" -}}
- apiGroups: [disttrain.io]
  resources: [disttrainjobs]
  verbs: [get, list, watch, patch, delete]   # get: a job held without its templates; patch: Kueue's suspend; delete: ttlSecondsAfterFinished
- apiGroups: [disttrain.io]
  resources: [disttrainjobs/status]
  verbs: [patch]
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch, create, delete, patch]   # patch: drops the finalizer pods of earlier versions hold
- apiGroups: [""]
  resources: [pods/log]
  verbs: [get]
- apiGroups: [apps]
  resources: [deployments]
  verbs: [list, watch, create]          # a job's TensorBoard
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [create]                       # ...and who may reach it: the job's own namespace
- apiGroups: [""]
  resources: [configmaps]
  verbs: [list, create, patch, delete]  # kept logs; list, patch and delete: those outliving their job
- apiGroups: [""]
  resources: [services, persistentvolumeclaims]
  verbs: [list, watch, create]
- apiGroups: [scheduling.x-k8s.io, scheduling.volcano.sh]
  resources: [podgroups]
  verbs: [create]                       # gang scheduling, one per job
- apiGroups: [scheduling.k8s.io]
  resources: [workloads, podgroups]
  verbs: [create]                       # Kubernetes' own gangs: a Workload and its PodGroup per job
- apiGroups: [kueue.x-k8s.io]
  resources: [workloads]
  verbs: [list, watch, create]          # queued jobs: one Workload each
- apiGroups: [kueue.x-k8s.io]
  resources: [workloads/status]
  verbs: [patch]                        # the Finished condition
- apiGroups: [""]
  resources: [events]
  verbs: [create, list]                  # list: what a StorageClass says of a claim that does not bind
{{- end -}}

{{/* What serving TFJobs adds to the operator's rules: the same as for its own jobs. */}}
{{- define "disttrain.tfjobRules" -}}
- apiGroups: [kubeflow.org]
  resources: [tfjobs]
  verbs: [get, list, watch, patch, delete]   # get: a job held without its templates; patch: Kueue's suspend; delete: ttlSecondsAfterFinished
- apiGroups: [kubeflow.org]
  resources: [tfjobs/status]
  verbs: [patch]
{{- end -}}

{{/* The namespaces a namespaced install runs jobs in, checked: at least one, and never the release's own,
where whoever may create pods could run as the operator's account. */}}
{{- define "disttrain.checkNamespaces" -}}
{{- if eq .Values.scope "namespaced" }}
{{- if not .Values.namespaces }}
{{- fail "scope namespaced needs namespaces: the namespaces whose jobs the operator runs" }}
{{- end }}
{{- if has .Release.Namespace .Values.namespaces }}
{{- fail (printf "namespaces may not hold the release's own namespace %s: the operator runs apart from the jobs, so that no tenant who may create pods there can run as its account" .Release.Namespace) }}
{{- end }}
{{- end }}
{{- end -}}

{{/* What the operator reads of cluster-scoped objects: CRDs (kopf serves a job CRD installed after it
started; get: the TFJob CRD), an admitted flavor's node labels and tolerations, a queued job's priority. */}}
{{- define "disttrain.clusterReadRules" -}}
- apiGroups: [apiextensions.k8s.io]
  resources: [customresourcedefinitions]
  verbs: [get, list, watch]
- apiGroups: [kueue.x-k8s.io]
  resources: [resourceflavors]
  verbs: [get]
- apiGroups: [kueue.x-k8s.io]
  resources: [workloadpriorityclasses]
  verbs: [get]
- apiGroups: [scheduling.k8s.io]
  resources: [priorityclasses]
  verbs: [get]
{{- end -}}

{{/* The objects of a file of the chart's (its own copy of deploy/'s or crds/' generated files), each kept on
`helm uninstall` where it is labelled disttrain.io/kept-on-uninstall: the CRDs with the users' jobs, and
the roles users read them by, as deploy/'s uninstall keeps them. */}}
{{- define "disttrain.fileObjects" -}}
{{- range $text := regexSplit "(?m)^---[ \t]*$" (.Files.Get .path) -1 }}
{{- $object := fromYaml $text }}
{{- if $object }}
{{- if eq (dig "metadata" "labels" "disttrain.io/kept-on-uninstall" "" $object) "true" }}
{{- $annotations := merge (dict "helm.sh/resource-policy" "keep") ($object.metadata.annotations | default dict) }}
{{- $_ := set $object.metadata "annotations" $annotations }}
{{- end }}
---
{{ toYaml $object }}
{{- end }}
{{- end }}
{{- end -}}
