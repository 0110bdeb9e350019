package controllers

import "github.com/emaildata/emaildata/internal/platform/installsecret"

// The RBAC of the manager and the REST API, by the calls they make.
//
// The markers below are the manager's grants that hold for every
// installation; `make manifests` turns them into config/rbac/role.yaml: a
// ClusterRole for the markers without a namespace (the watched kinds, in
// every watched namespace) and a Role in the operator's namespace for
// those with namespace=system. The chart copies that file
// (charts/emaildata/files/rbac/manager-role.yaml) and, with
// watchNamespaces, renders the ClusterRole's namespaced rules as Roles in
// the watched namespaces instead. The grants on objects that have a name
// per installation (the leader Lease, the list ID counter, the
// installation secrets) are restricted to those names, which markers
// cannot render per release: they are written out in config/rbac
// (leader_election_role.yaml, installation_role.yaml) and the chart's
// templates/rbac.yaml.
//
// APICalls lists every call of the manager and the API. A test
// (internal/kits/deploy, TestRBACMatchesAPICalls) renders the chart,
// applies its RBAC to a real API server and checks both ways: each call is
// allowed where it is made, and each rule granted is one a call needs.
// Another runs the manager and the API as their service accounts. A call
// added to the code needs its line here, and its marker or template rule.
//
// Secrets are read as the code reads them: by name. Nothing of the manager
// lists or watches a Secret anywhere; the API watches the labelled key
// Secrets of one namespace (an informer needs list and watch, which RBAC
// cannot narrow to a label).
//
// get goes with list wherever list is granted: a list returns every object
// already, so get adds nothing to what can be read, and a cached read by
// name may then go to the server.

// Watched kinds, in every watched namespace (the ClusterRole).
//
// EmailLists: the reconciler's informer (list, watch), live reads by name
// (get: listID, the reservation check), finalizers by merge patch (patch),
// status by merge patch (emaillists/status patch).
// +kubebuilder:rbac:groups=lists.emaildata.io,resources=emaillists,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=lists.emaildata.io,resources=emaillists/status,verbs=patch
// Purchases: the Purchase reconciler's informer and the EmailList
// reconciler's watch of them; status by merge patch.
// +kubebuilder:rbac:groups=lists.emaildata.io,resources=purchases,verbs=get;list;watch
// +kubebuilder:rbac:groups=lists.emaildata.io,resources=purchases/status,verbs=patch
// Datasets: informer, finalizer and status patches; datasets/finalizers
// update because a Dataset owns its Job with blockOwnerDeletion, which
// clusters with the OwnerReferencesPermissionEnforcement admission plugin
// (OpenShift) check.
// +kubebuilder:rbac:groups=lists.emaildata.io,resources=datasets,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=lists.emaildata.io,resources=datasets/status,verbs=patch
// +kubebuilder:rbac:groups=lists.emaildata.io,resources=datasets/finalizers,verbs=update
// ConfigMaps: a metadata-only watch (WatchesMetadata in SetupWithManager:
// a list waiting for its configMapKeyRef looks again when it appears) and
// the read of a list's or Dataset's configMapKeyRef by name (copyConfigMap,
// sourceAppeared).
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch
// Secrets: get by name only, in the list's own namespace: its
// spec.source.credentialsSecretRef (copyExternal) and
// spec.callbackSecretRef (callbackSigning).
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// Events about lists, Purchases and Datasets (the events.k8s.io recorder
// creates them and patches a repeated one).
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Cluster-scoped: the metrics endpoint authenticates and authorizes each
// scraper (controller-runtime's filters, see internal/operator).
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// The operator's namespace only (the Role), where list and Dataset Jobs run.
//
// Jobs: the cache of the worker Jobs (list, watch; see the operator's
// cache options) and an uncached list (JobExecutor.budgetInUse); create
// (JobExecutor.create, DatasetJobLoader), patch (the finished Job's TTL),
// delete (JobExecutor.Stop, a Job whose pods cannot start).
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;patch;delete,namespace=system
// Pods of those Jobs: cached (a pod that cannot start, blockedPod) and an
// uncached list of a failed Job's pods (oomKilledShards).
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch,namespace=system
// The Job controller's events: an uncached list (lastFailedCreate: why a
// Job has no pod).
// +kubebuilder:rbac:groups="",resources=events,verbs=list,namespace=system

// Account names a service account of the installation.
type Account string

// The accounts. Worker pods have none that can call the API server (no
// token is mounted, nothing is bound).
const (
	AccountManager Account = "manager"
	AccountAPI     Account = "api"
)

// Scope says where a call is made.
type Scope string

const (
	// ScopeWatched: in every namespace the manager watches (every
	// namespace, or watchNamespaces plus its own).
	ScopeWatched Scope = "watched"
	// ScopeListNamespaces: where lists applied with kubectl name their own
	// Secrets: every namespace, or the watchNamespaces. In a namespaced
	// install the operator's own namespace is one only when it is listed
	// there: otherwise its Secrets are read by name, the installation
	// secrets alone (Helm's release records live there).
	ScopeListNamespaces Scope = "list-namespaces"
	// ScopeOperator: in the operator's (the release's) namespace only.
	ScopeOperator Scope = "operator"
	// ScopeAPIKeys: in the namespace of the API key Secrets (the
	// operator's unless the API is given another).
	ScopeAPIKeys Scope = "api-keys"
	// ScopeCluster: a cluster-scoped resource.
	ScopeCluster Scope = "cluster"
)

// Objects with a name per installation that calls name.
const (
	ObjectLease         = "leader-election-lease"
	ObjectListIDCounter = "list-id-counter"
	// The installation secrets are named by their installsecret.Kind.
)

// APICall is one kind of request a binary makes to the API server.
type APICall struct {
	Account Account
	// Group and Resource ("emaillists/status" for a subresource).
	Group, Resource string
	Verb            string
	Scope           Scope
	// Object, when set, is the one object the call names: an Object*
	// constant or an installsecret.Kind. A create cannot be restricted to
	// a name by RBAC (the name is not known when it is authorized), so a
	// create naming an object is granted on the whole resource.
	Object string
	// By names the code making the call.
	By string
}

// APICalls lists every call of the manager and the API.
func APICalls() []APICall {
	m, a := AccountManager, AccountAPI
	const lists = "lists.emaildata.io"
	calls := []APICall{
		{m, lists, "emaillists", "list", ScopeWatched, "", "EmailList informer"},
		{m, lists, "emaillists", "watch", ScopeWatched, "", "EmailList informer"},
		{m, lists, "emaillists", "get", ScopeWatched, "", "EmailListReconciler.listID, reservedID: live reads"},
		{m, lists, "emaillists", "patch", ScopeWatched, "", "addFinalizer, removeFinalizer"},
		{m, lists, "emaillists/status", "patch", ScopeWatched, "", "patchStatus"},
		{m, lists, "purchases", "list", ScopeWatched, "", "Purchase informer"},
		{m, lists, "purchases", "watch", ScopeWatched, "", "Purchase informer"},
		{m, lists, "purchases", "get", ScopeWatched, "", "goes with list"},
		{m, lists, "purchases/status", "patch", ScopeWatched, "", "patchStatus"},
		{m, lists, "datasets", "list", ScopeWatched, "", "Dataset informer"},
		{m, lists, "datasets", "watch", ScopeWatched, "", "Dataset informer"},
		{m, lists, "datasets", "get", ScopeWatched, "", "goes with list"},
		{m, lists, "datasets", "patch", ScopeWatched, "", "addFinalizer, removeFinalizer"},
		{m, lists, "datasets/status", "patch", ScopeWatched, "", "patchStatus"},
		{m, lists, "datasets/finalizers", "update", ScopeWatched, "", "DatasetJobLoader: SetControllerReference (blockOwnerDeletion)"},
		{m, "", "configmaps", "list", ScopeWatched, "", "WatchesMetadata(ConfigMap)"},
		{m, "", "configmaps", "watch", ScopeWatched, "", "WatchesMetadata(ConfigMap)"},
		{m, "", "configmaps", "get", ScopeWatched, "", "copyConfigMap, sourceAppeared"},
		{m, "", "secrets", "get", ScopeListNamespaces, "", "copyExternal (credentialsSecretRef), callbackSigning (callbackSecretRef)"},
		{m, "events.k8s.io", "events", "create", ScopeWatched, "", "the event recorder"},
		{m, "events.k8s.io", "events", "patch", ScopeWatched, "", "the event recorder (a repeated event)"},
		{m, "authentication.k8s.io", "tokenreviews", "create", ScopeCluster, "", "metrics endpoint authentication"},
		{m, "authorization.k8s.io", "subjectaccessreviews", "create", ScopeCluster, "", "metrics endpoint authorization"},

		{m, "batch", "jobs", "list", ScopeOperator, "", "worker Job cache, JobExecutor.budgetInUse"},
		{m, "batch", "jobs", "watch", ScopeOperator, "", "worker Job cache"},
		{m, "batch", "jobs", "get", ScopeOperator, "", "goes with list"},
		{m, "batch", "jobs", "create", ScopeOperator, "", "JobExecutor.create, DatasetJobLoader"},
		{m, "", "configmaps", "create", ScopeOperator, "", "JobExecutor.ensureWorkerConfig: the workers' configuration, beside their Job and owned by it"},
		{m, "batch", "jobs", "patch", ScopeOperator, "", "JobExecutor: the finished Job's TTL"},
		{m, "batch", "jobs", "delete", ScopeOperator, "", "JobExecutor.Stop, a Job whose pods cannot start"},
		{m, "", "pods", "list", ScopeOperator, "", "worker pod cache, oomKilledShards"},
		{m, "", "pods", "watch", ScopeOperator, "", "worker pod cache"},
		{m, "", "pods", "get", ScopeOperator, "", "goes with list"},
		{m, "", "events", "list", ScopeOperator, "", "lastFailedCreate"},
		{m, "", "events", "create", ScopeOperator, "", "leader election events"},
		{m, "", "events", "patch", ScopeOperator, "", "leader election events"},
		{m, "coordination.k8s.io", "leases", "get", ScopeOperator, ObjectLease, "leader election"},
		{m, "coordination.k8s.io", "leases", "create", ScopeOperator, ObjectLease, "leader election"},
		{m, "coordination.k8s.io", "leases", "update", ScopeOperator, ObjectLease, "leader election"},

		{a, lists, "emaillists", "list", ScopeOperator, "", "the API's EmailList informer, GET /v5/list (live list)"},
		{a, lists, "emaillists", "watch", ScopeOperator, "", "the API's EmailList informer"},
		{a, lists, "emaillists", "get", ScopeOperator, "", "goes with list"},
		{a, lists, "emaillists", "create", ScopeOperator, "", "POST /v5/list"},
		{a, lists, "purchases", "list", ScopeOperator, "", "the API's Purchase informer"},
		{a, lists, "purchases", "watch", ScopeOperator, "", "the API's Purchase informer"},
		{a, lists, "purchases", "get", ScopeOperator, "", "goes with list"},
		{a, lists, "purchases", "create", ScopeOperator, "", "POST /v5/list/{id}/purchase"},
		{a, "", "secrets", "list", ScopeAPIKeys, "", "the API key Secret informer"},
		{a, "", "secrets", "watch", ScopeAPIKeys, "", "the API key Secret informer"},
	}
	// The list ID counter: both allocate (internal/lists/listid).
	for _, acc := range []Account{m, a} {
		calls = append(calls,
			APICall{acc, "", "configmaps", "get", ScopeOperator, ObjectListIDCounter, "listid.Allocator"},
			APICall{acc, "", "configmaps", "update", ScopeOperator, ObjectListIDCounter, "listid.Allocator"},
			APICall{acc, "", "configmaps", "create", ScopeOperator, ObjectListIDCounter, "listid.Allocator: the counter's first use"},
		)
	}
	// The installation secrets: both read them by name; only the manager
	// makes them (operator.EnsureInstallationSecrets). The history keys
	// are read by name too, not put in the manager's or the API's pod
	// spec: the manager would wait at pod start for a Secret it makes once
	// running, and the get is on names both accounts hold already. Worker
	// pods take the history key from the kubelet (a secretKeyRef), which
	// needs no grant of theirs.
	for _, s := range installSecretKinds() {
		calls = append(calls,
			APICall{m, "", "secrets", "get", ScopeOperator, s, "listid.Allocator, callbackSigning, EnsureInstallationSecrets, operator.historyKey"},
			APICall{a, "", "secrets", "get", ScopeOperator, s, "listid.Allocator, GET /v5/callback/secret, restapi.LoadInstallationKeys (the history keys)"},
			APICall{m, "", "secrets", "create", ScopeOperator, s, "EnsureInstallationSecrets, operator.historyKey"},
		)
	}
	return calls
}

// installSecretKinds are the installation secrets' kinds, as call objects.
func installSecretKinds() []string {
	var out []string
	for _, s := range installsecret.Specs() {
		out = append(out, string(s.Kind))
	}
	return out
}
