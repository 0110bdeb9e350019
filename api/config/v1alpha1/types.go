// Package v1alpha1 is the configuration file of the emaildata binaries:
// one Configuration (apiVersion config.emaildata.io/v1alpha1) that the
// manager, the REST API and the worker read with --config. It is an API
// like the resource types beside it: its fields are its documentation
// (docs/configuration.md is generated from these comments by
// hack/configdocs), SetDefaults is the one home of every default, and
// Validate reports every problem with its field path.
//
// Secrets never belong in the file: URLs that carry a password come from
// the environment (a Secret's keys, see EnvURLs) and keys from mounted
// files or installation Secrets; Validate refuses a password in a URL
// written in the file.
//
// The package links no Kubernetes library (internal/kits/archtest): the
// wiring and the worker read it.
//
// +kubebuilder:object:generate=false
// +kubebuilder:skip
package v1alpha1

// APIVersion is this configuration's apiVersion.
const APIVersion = "config.emaildata.io/v1alpha1"

// Kind is the kind of the one type of this group.
const Kind = "Configuration"

// Configuration is the whole configuration of an installation. The
// manager, the API and the worker Jobs read the same document; each uses
// the sections it needs.
type Configuration struct {
	// APIVersion is config.emaildata.io/v1alpha1.
	APIVersion string `json:"apiVersion"`
	// Kind is Configuration.
	Kind string `json:"kind"`

	// Namespaces says where the operator, the lists, the worker Jobs and
	// the API keys live.
	Namespaces Namespaces `json:"namespaces"`
	// Logging chooses the level and format of every binary's log.
	Logging Logging `json:"logging"`
	// Metrics configures the manager's metrics server.
	Metrics Metrics `json:"metrics"`
	// Store is the blob store holding lists, parts and results.
	Store Store `json:"store"`
	// Executor runs lists: Kubernetes Jobs or in-process.
	Executor Executor `json:"executor"`
	// Pipeline cuts lists into shards and bounds hostile input.
	Pipeline Pipeline `json:"pipeline"`
	// Verification is the email verification engine: DNS, SMTP, proxies
	// and the verification history.
	Verification Verification `json:"verification"`
	// Fleet is the shared backend of per-host SMTP limits and learnt host
	// state.
	Fleet Fleet `json:"fleet"`
	// Fraud configures GET /fr and the fraud feedback routes.
	Fraud Fraud `json:"fraud"`
	// API configures the REST API.
	API API `json:"api"`
	// Manager holds the controllers' own settings.
	Manager Manager `json:"manager"`
	// People is the reference people store of email_intelligence and
	// email_append.
	People People `json:"people"`
	// Installation names the installation's shared objects: the list ID
	// counter and its Secrets.
	Installation Installation `json:"installation"`
}

// Namespaces: one setting per namespace, shared by every binary.
type Namespaces struct {
	// Operator is the operator's namespace: it holds the list ID counter,
	// the installation secrets, the leader election Lease and (unless
	// APIKeys) the API key Secrets. Empty: $POD_NAMESPACE, else
	// emaildata-system.
	Operator string `json:"operator,omitempty"`
	// Lists is where the REST API creates lists, the only namespace where
	// source.uploadKey is honoured. Empty: Operator.
	Lists string `json:"lists,omitempty"`
	// Workers is where list Jobs run, whatever the list's namespace; the
	// worker service account, env Secret and store PVC live there. Empty:
	// Operator.
	Workers string `json:"workers,omitempty"`
	// APIKeys holds the API key Secrets; one holding nothing else keeps
	// other Secrets out of the API's reach. Empty: Operator.
	APIKeys string `json:"apiKeys,omitempty"`
	// Watch restricts the manager to lists, Purchases and Datasets in
	// these namespaces (plus Operator and Lists). Empty: every namespace.
	Watch []string `json:"watch,omitempty"`
	// StorePrefixes grants each namespace the store prefix its lists may
	// read through source.blobURL, e.g. team-a: imports/team-a/.
	StorePrefixes map[string]string `json:"storePrefixes,omitempty"`
}

// Logging chooses what is logged and how.
type Logging struct {
	// Level is the least severe level logged: debug, info, warn or error
	// (logr's V(n) is slog level -n). At debug the API logs every request
	// (no personal data).
	Level string `json:"level"`
	// Format is json or text.
	Format string `json:"format"`
}

// Metrics configures the manager's metrics server (the bind addresses
// are flags: they differ per process).
type Metrics struct {
	// Secure serves metrics over HTTPS behind TokenReview and
	// SubjectAccessReview; false: plain HTTP, anyone.
	Secure bool `json:"secure"`
	// CertDir holds tls.crt and tls.key for the metrics server. Empty: a
	// self-signed certificate.
	CertDir string `json:"certDir,omitempty"`
}

// Store is the blob store.
type Store struct {
	// URL is the blob store: file://, s3://, gs:// or azblob://.
	// Credentials come from the environment, never from this file. Empty:
	// $BLOB_URL.
	URL string `json:"url"`
	// PVC holds a file:// store; it is mounted into worker pods.
	PVC string `json:"pvc,omitempty"`
	// MountPath is where PVC is mounted.
	MountPath string `json:"mountPath"`
	// KeepParts keeps the shards' intermediate parts after the merge
	// (debugging).
	KeepParts bool `json:"keepParts,omitempty"`
	// OrphanUploadAge removes an upload no list names once nothing has
	// written it for this long (what an API killed mid-upload leaves);
	// negative: never.
	OrphanUploadAge Duration `json:"orphanUploadAge"`
	// UploadSweepInterval is how often the store's uploads folder is swept
	// for orphaned uploads.
	UploadSweepInterval Duration `json:"uploadSweepInterval"`
}

// Executor runs lists.
type Executor struct {
	// Mode is job (Kubernetes Indexed Jobs, one pod per shard) or local
	// (in the manager's process).
	Mode string `json:"mode"`
	// MaxConcurrentReconciles is the number of lists reconciled (and
	// prepared) at once.
	MaxConcurrentReconciles int `json:"maxConcurrentReconciles"`
	// Jobs shapes the worker Jobs and their pods.
	Jobs Jobs `json:"jobs"`
}

// Jobs shapes the worker Jobs.
type Jobs struct {
	// Image is the worker image. Empty: $WORKER_IMAGE.
	Image string `json:"image,omitempty"`
	// ImagePullPolicy is Always, IfNotPresent or Never.
	ImagePullPolicy string `json:"imagePullPolicy"`
	// ServiceAccountName runs worker pods, in the workers' namespace.
	// Empty: its default account (no token is mounted either way).
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
	// EnvFromSecret names a Secret whose keys become the workers'
	// environment (store credentials, FLEET_URL, HISTORY_URL with their
	// passwords).
	EnvFromSecret string `json:"envFromSecret,omitempty"`
	// Resources of a worker pod.
	Resources WorkerResources `json:"resources"`
	// NodeSelector of worker pods.
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Tolerations of worker pods.
	Tolerations []Toleration `json:"tolerations,omitempty"`
	// PriorityClassName of worker pods.
	PriorityClassName string `json:"priorityClassName,omitempty"`
	// ExtraArgs are appended to the worker's arguments.
	ExtraArgs []string `json:"extraArgs,omitempty"`
	// Parallelism is the number of pods running at once for one list.
	Parallelism int32 `json:"parallelism"`
	// BackoffLimitPerIndex is the number of retries of a failed shard.
	BackoffLimitPerIndex int32 `json:"backoffLimitPerIndex"`
	// TTLAfterFinished is how long a finished Job stays, once its outcome
	// is in status (rounded down to seconds).
	TTLAfterFinished Duration `json:"ttlAfterFinished"`
	// ActiveDeadline is the longest a worker Job may run before it is
	// stopped and its list or Dataset fails with reason DeadlineExceeded
	// (rounded up to seconds); negative: none.
	ActiveDeadline Duration `json:"activeDeadline"`
	// PodStartGrace is how long a worker pod may be unable to start
	// (image pull, missing binary, no node fits) before its list or
	// Dataset fails; raise it where nodes are added on demand.
	PodStartGrace Duration `json:"podStartGrace"`
}

// Toleration lets worker pods run on tainted nodes, as a pod's
// tolerations do.
type Toleration struct {
	// Key is the taint's key; empty with operator Exists: every taint.
	Key string `json:"key,omitempty"`
	// Operator is Equal (the default) or Exists.
	Operator string `json:"operator,omitempty"`
	// Value must equal the taint's with operator Equal.
	Value string `json:"value,omitempty"`
	// Effect is NoSchedule, PreferNoSchedule or NoExecute; empty: all.
	Effect string `json:"effect,omitempty"`
	// TolerationSeconds bounds how long a NoExecute taint is tolerated.
	TolerationSeconds *int64 `json:"tolerationSeconds,omitempty"`
}

// WorkerResources are a worker pod's requests and limits.
type WorkerResources struct {
	// CPU request.
	CPU Quantity `json:"cpu"`
	// CPULimit; zero: none.
	CPULimit Quantity `json:"cpuLimit,omitempty"`
	// Memory request and limit.
	Memory Quantity `json:"memory"`
}

// Pipeline prepares lists and bounds what input can cost.
type Pipeline struct {
	// ShardBytes is the target input size of a shard.
	ShardBytes Quantity `json:"shardBytes"`
	// MaxShards is the most shards of one list.
	MaxShards int `json:"maxShards"`
	// ShardBy is mx (rows go to shards by their email domain's primary
	// MX host, looked up once per domain at preparation, so that one pod
	// talks to each mail host, even a provider's hosting thousands of
	// domains), domain (by their email's domain; both for services whose
	// work is per mail host) or rows (contiguous runs of rows).
	ShardBy string `json:"shardBy"`
	// MXLookupTimeout bounds one MX lookup of shardBy mx; a domain whose
	// lookup fails or times out goes to a shard by its own name.
	MXLookupTimeout Duration `json:"mxLookupTimeout"`
	// MXLookupBudget bounds all the MX lookups of one list's preparation;
	// the domains met after it is spent go to shards by their own name.
	MXLookupBudget Duration `json:"mxLookupBudget"`
	// MXLookupConcurrency is the MX lookups of shardBy mx made at once
	// (a plain input's domains are read ahead and looked up together; a
	// zipped input's one at a time as the scan meets them).
	MXLookupConcurrency int `json:"mxLookupConcurrency"`
	// DistributeMemory holds rows while preparation regroups them by
	// domain shard, shared by the lists prepared at once; past it runs
	// spill to the store.
	DistributeMemory Quantity `json:"distributeMemory"`
	// DedupMemory is the memory of the duplicate search at preparation,
	// shared by the lists prepared at once; past it sorted runs spill to
	// the store.
	DedupMemory Quantity `json:"dedupMemory"`
	// Limits bound hostile list files (the API checks uploads, the
	// manager and workers read them, with the same limits).
	Limits InputLimits `json:"limits"`
}

// InputLimits bound the resources hostile input can make us use.
type InputLimits struct {
	// MaxExpandedBytes is the largest uncompressed size of a zipped list.
	MaxExpandedBytes Quantity `json:"maxExpandedBytes"`
	// MaxRecordBytes is the largest single row.
	MaxRecordBytes Quantity `json:"maxRecordBytes"`
	// MaxExpansionRatio is the largest ratio of a zipped list's
	// uncompressed size to the zip's (files up to 1 MiB are exempt;
	// negative: no cap).
	MaxExpansionRatio int64 `json:"maxExpansionRatio"`
}

// Verification is the verification engine.
type Verification struct {
	// DNS looks up mail hosts.
	DNS DNS `json:"dns"`
	// SMTP checks mailboxes.
	SMTP SMTP `json:"smtp"`
	// Interactive replaces SMTP's timeouts for the API's calls (GET
	// /v5/ev, GET /fr), which answer within seconds: a list can wait, a
	// caller cannot.
	Interactive InteractiveSMTP `json:"interactive"`
	// Proxies relay SMTP probes.
	Proxies Proxies `json:"proxies"`
	// RowsInFlight is the number of rows a process keeps in verification
	// at once, shared by the shards it runs; about 0.7 KB of memory each.
	RowsInFlight int `json:"rowsInFlight"`
	// GroupRows is the most rows a shard reads ahead and groups by domain
	// before verification (at most half its share of rowsInFlight, or the
	// whole shard when it fits in that share): a domain's rows among them
	// are verified in one batch, so its mail host's sessions are planned
	// from all of them, not opened again for each batch they fell in. The
	// output keeps the input's row order; the rows are those in flight
	// (about 80 bytes a row more). Up to the batch size (1,000, the
	// default), or with dns.server off: no grouping. Off by default: a
	// host of many domains (a provider's) then gets its work a whole
	// domain at a time, and its first session's sample of replies spans
	// fewer domains, so it less often shows the greylisting that holds
	// back a parallel first-pass session (8 processes on 20 shared MX
	// hosts: 97-98 connections against 90-94; docs/benchmarks.md).
	GroupRows int `json:"groupRows"`
	// ListsDir holds operator list extensions (disposable.txt, free.txt,
	// role.txt, ...; a mounted ConfigMap), which the manager publishes to
	// the store for worker Jobs.
	ListsDir string `json:"listsDir,omitempty"`
	// ExtraTLDs are accepted in addition to ICANN's top-level domains.
	ExtraTLDs []string `json:"extraTLDs,omitempty"`
	// History remembers verdicts so that a recent check answers again.
	History History `json:"history"`
}

// DNS configures the resolver.
type DNS struct {
	// Server is the resolver as host:port, "system" (/etc/resolv.conf) or
	// "off" (syntax and list checks only: no SMTP either).
	Server string `json:"server"`
	// Timeout of one DNS query.
	Timeout Duration `json:"timeout"`
	// Workers bounds the domains of a batch looked up at once.
	Workers int `json:"workers"`
}

// SMTP is the politeness and patience of the mailbox check. Its defaults
// are the SMTP prober's own (smtpprobe.DefaultConfig), but for the
// names it announces.
type SMTP struct {
	// Enabled turns the mailbox check on.
	Enabled bool `json:"enabled"`
	// Port of mail hosts.
	Port int `json:"port"`
	// HELOName is the EHLO name the probes announce.
	HELOName string `json:"heloName"`
	// MailFrom is the envelope sender of probes.
	MailFrom string `json:"mailFrom"`
	// MaxConnsPerHost bounds the concurrent connections per mail host
	// address (per egress).
	MaxConnsPerHost int `json:"maxConnsPerHost"`
	// MaxSleepingConnsPerHost bounds them instead while sessions there
	// sleep through the host's error sleeps as planned (Postfix's slow
	// zone: a second before every reply; such a session mostly waits on
	// the host), where the plan finishes the host's work sooner so;
	// never above the host's learnt limit; below maxConnsPerHost,
	// maxConnsPerHost.
	MaxSleepingConnsPerHost int `json:"maxSleepingConnsPerHost"`
	// RatePerHost is the new connections a second per mail host address.
	RatePerHost float64 `json:"ratePerHost"`
	// MaxSessions caps the SMTP connections open at once, all hosts
	// together, that do the process's work (maxSleepingSessions more may
	// sleep).
	MaxSessions int `json:"maxSessions"`
	// MaxSleepingSessions is the number of sessions that may, beyond
	// maxSessions, sleep through a host's error sleeps without a session
	// slot while the process waits for greylisting retries anyway (no
	// work, a socket each: fewer connections to the host, no other host
	// held back). 0 (the default): half of maxSessions; -1: none, so
	// that maxSessions caps every connection (an egress proxy's limit,
	// say).
	MaxSleepingSessions int `json:"maxSleepingSessions"`
	// MaxRcptPerTransaction is the number of RCPTs after one MAIL FROM
	// (RFC 5321: servers take at least 100); a host's lower limit is
	// learnt and kept within [1, this]. While it is not known, a session
	// whose non-mail budget (10 RSETs at a server that does not name
	// itself Postfix) leaves too few transactions for the host's queued
	// work takes bigger ones, within maxRcptPerSession.
	MaxRcptPerTransaction int `json:"maxRcptPerTransaction"`
	// MaxRcptPerSession is the number of RCPTs in one session before
	// reconnecting (a provider's MX host may have thousands of a list's
	// recipients; each session is a connection it counts).
	MaxRcptPerSession int `json:"maxRcptPerSession"`
	// MaxRejectsPerSession is the number of rejected RCPTs in one session
	// to a Postfix server before reconnecting (Postfix slows every reply
	// from the 10th error on); -1: no limit.
	MaxRejectsPerSession int `json:"maxRejectsPerSession"`
	// PipelineDepth is the number of RCPTs per round trip to servers
	// offering PIPELINING (1: none).
	PipelineDepth int `json:"pipelineDepth"`
	// RefusalBackoff is the first wait before trying again a mail host
	// that asked to slow down (421); it doubles with each refusal in a
	// row.
	RefusalBackoff Duration `json:"refusalBackoff"`
	// ConnectTimeout is the TCP connect timeout.
	ConnectTimeout Duration `json:"connectTimeout"`
	// GreetingTimeout is the wait for a server's greeting (silent longer:
	// a tarpit).
	GreetingTimeout Duration `json:"greetingTimeout"`
	// CommandTimeout is the wait for the replies to each command.
	CommandTimeout Duration `json:"commandTimeout"`
	// HostPenaltyTTL is how long a stalled or unreachable mail host is
	// skipped.
	HostPenaltyTTL Duration `json:"hostPenaltyTTL"`
	// GreylistRetry is the delay before retrying a greylisted address.
	GreylistRetry Duration `json:"greylistRetry"`
	// MaxRefusals is the number of refusals in a row (421, connection
	// refused) after which a mail host counts as failed; RefusalBackoff
	// doubles between them.
	MaxRefusals int `json:"maxRefusals"`
	// HostMemoryTTL is how long the limits learnt about a mail host
	// (lower rates, RCPTs per transaction and per session, rejections per
	// session) outlive the last lesson, in a process without a fleet
	// backend.
	HostMemoryTTL Duration `json:"hostMemoryTTL"`
	// AllowCIDRs are private or loopback ranges the probes may reach; by
	// default they only reach public addresses (MX records can point
	// anywhere, so this guards the cluster's own network).
	AllowCIDRs []string `json:"allowCIDRs,omitempty"`
}

// InteractiveSMTP are the API's SMTP timeouts.
type InteractiveSMTP struct {
	// ConnectTimeout is the TCP connect timeout of the API's probes.
	ConnectTimeout Duration `json:"connectTimeout"`
	// GreetingTimeout is the wait for a greeting in the API's probes.
	GreetingTimeout Duration `json:"greetingTimeout"`
	// CommandTimeout is the wait for each reply in the API's probes.
	CommandTimeout Duration `json:"commandTimeout"`
	// HostPenaltyTTL is how long the API skips a stalled mail host.
	HostPenaltyTTL Duration `json:"hostPenaltyTTL"`
}

// Proxies are SOCKS5 relays for SMTP.
type Proxies struct {
	// URLs are socks5://host:port relays; a pool when several. Relays
	// with a password come from $SMTP_PROXIES (comma separated), not from
	// this file.
	URLs []string `json:"urls,omitempty"`
	// MaxConnsPerProxy bounds the connections open through each relay.
	MaxConnsPerProxy int `json:"maxConnsPerProxy"`
}

// History is the verification history.
type History struct {
	// URL is redis://host:port/db, postgres://..., bolt:///path.db or
	// "off". Empty: $HISTORY_URL, else the fleet backend, else none. A
	// history needs a key: the installation secret (manager, API), else
	// $HISTORY_KEY or KeyFile.
	URL string `json:"url,omitempty"`
	// TTLs say how long each kind of verdict is reused (0: never kept).
	TTLs HistoryTTLs `json:"ttls"`
	// Scope says whose earlier checks answer a call: "tenant" (a tenant's
	// own only) or "shared" (every tenant's, dated to the hour: it tells a
	// tenant that someone checked an address). Every process of an
	// installation must run the same scope.
	Scope string `json:"scope"`
	// KeyFile holds the history's key (a mounted Secret). Empty:
	// $HISTORY_KEY, else the installation secret.
	KeyFile string `json:"keyFile,omitempty"`
	// KeyCheckInterval is how often a process checks that the store's
	// history is kept under its key (a mismatch is logged, counted and
	// stops its use of the history).
	KeyCheckInterval Duration `json:"keyCheckInterval"`
	// Tenant is whose checks a `worker run` makes, for a history in the
	// tenant scope. The cluster names its tenants itself (api/<digest>,
	// namespace/<name>) and does not read it.
	Tenant string `json:"tenant"`
}

// HistoryTTLs say how long each kind of verdict is reused.
type HistoryTTLs struct {
	// Deliverable (50).
	Deliverable Duration `json:"deliverable"`
	// Undeliverable (400 no such mailbox, 420 refused).
	Undeliverable Duration `json:"undeliverable"`
	// CatchAll (45).
	CatchAll Duration `json:"catchAll"`
	// Unverified (20) and mailbox full (410); timeouts and deferrals are
	// never kept.
	Unverified Duration `json:"unverified"`
}

// Fleet is the shared backend of per-host limits.
type Fleet struct {
	// URL is redis://host:port/db[?prefix=emaildata:]. A URL with a
	// password comes from $FLEET_URL. Empty: $FLEET_URL, else each process
	// keeps its own limits (the manager divides each host's budget among
	// a list's pods).
	URL string `json:"url,omitempty"`
	// Egress names this cluster's own address as an egress identity;
	// each SOCKS5 proxy counts on its own.
	Egress string `json:"egress"`
	// LeaseTTL: a killed process's connection slots are free again within
	// it.
	LeaseTTL Duration `json:"leaseTTL"`
}

// Fraud configures GET /fr and POST /feedback/v1.
type Fraud struct {
	// WeightsFile holds the fraud weights and thresholds (a mounted
	// ConfigMap), reloaded on change. Empty: the embedded defaults.
	WeightsFile string `json:"weightsFile,omitempty"`
	// GeoIPDatabases are MaxMind-format databases.
	GeoIPDatabases []string `json:"geoIPDatabases,omitempty"`
	// HistoryURL keeps the fraud history and feedback: postgres://...,
	// redis://host:port/db[?prefix=], or "memory" (this process, lost on
	// restart). Empty: $FRAUD_HISTORY_URL, else the fleet backend when a
	// key is given, else memory with POST /feedback/v1 refused.
	HistoryURL string `json:"historyURL,omitempty"`
	// HistoryKeyFile holds the key that digests identifiers in the fraud
	// history. Empty: $FRAUD_HISTORY_KEY, else the installation secret.
	HistoryKeyFile string `json:"historyKeyFile,omitempty"`
	// EmailBudget is the time budget of the email check in GET /fr.
	EmailBudget Duration `json:"emailBudget"`
	// SMTP runs the mailbox check inside GET /fr.
	SMTP bool `json:"smtp,omitempty"`
}

// API configures the REST API.
type API struct {
	// MaxUploadSize is the largest accepted list file.
	MaxUploadSize Quantity `json:"maxUploadSize"`
	// FeedbackMaxSize is the largest accepted fraud feedback file.
	FeedbackMaxSize Quantity `json:"feedbackMaxSize"`
	// FeedbackFiles is the number of feedback files recorded at once
	// (each holds a store transaction while it arrives); beyond, 429.
	FeedbackFiles int `json:"feedbackFiles"`
	// FeedbackFilesPerTenant is the number of feedback files one tenant
	// may have recorded at once; beyond, 429.
	FeedbackFilesPerTenant int `json:"feedbackFilesPerTenant"`
	// RateLimit bounds each API key's requests.
	RateLimit RateLimit `json:"rateLimit"`
	// Throttle protects the API from slow and abusive clients.
	Throttle Throttle `json:"throttle"`
	// ShutdownTimeout is how long in-flight uploads may drain on stop.
	ShutdownTimeout Duration `json:"shutdownTimeout"`
	// DrainDelay is how long the API keeps serving, not ready, before
	// draining.
	DrainDelay Duration `json:"drainDelay"`
	// Console is the web console.
	Console Console `json:"console"`
}

// RateLimit is a token bucket per API key.
type RateLimit struct {
	// PerSecond is the requests a second per API key (a key's Secret may
	// override).
	PerSecond float64 `json:"perSecond"`
	// Burst per API key.
	Burst int `json:"burst"`
}

// Throttle bounds slow and abusive clients.
type Throttle struct {
	// BodyMinRate is the slowest pace of a request body, bytes a second;
	// a body behind it for BodyStall is cut with 408 (negative: no check).
	BodyMinRate int64 `json:"bodyMinRate"`
	// BodyStall is how long a request body may fall behind BodyMinRate.
	BodyStall Duration `json:"bodyStall"`
	// UploadsPerKey is the request bodies one API key may be sending at
	// once; past it 429 (negative: no cap).
	UploadsPerKey int `json:"uploadsPerKey"`
	// UploadsPerTenant is the request bodies one tenant may be sending at
	// once (negative: no cap).
	UploadsPerTenant int `json:"uploadsPerTenant"`
	// AuthFailureRate is the failed key checks a second one client
	// address may make after its burst; past it 429 (negative: no limit).
	AuthFailureRate float64 `json:"authFailureRate"`
	// AuthFailureBurst is the failed key checks one address may make at
	// once.
	AuthFailureBurst int `json:"authFailureBurst"`
	// ForbiddenRate is the calls a second refused with 403 one tenant may
	// make after its burst (negative: no limit).
	ForbiddenRate float64 `json:"forbiddenRate"`
	// ForbiddenBurst is the calls refused with 403 one tenant may make at
	// once.
	ForbiddenBurst int `json:"forbiddenBurst"`
	// TrackedAddresses is the client addresses (IPv6: /64 prefixes) whose
	// failed key checks are remembered.
	TrackedAddresses int `json:"trackedAddresses"`
	// TrustedProxies are the CIDRs of proxies whose X-Forwarded-For names
	// the client. Empty: the TCP peer is the client.
	TrustedProxies []string `json:"trustedProxies,omitempty"`
}

// Console is the API's web console.
type Console struct {
	// Enabled serves the web console at /console.
	Enabled bool `json:"enabled"`
}

// Manager holds the controllers' settings.
type Manager struct {
	// SourceGrace is how long to wait for a missing list source.
	SourceGrace Duration `json:"sourceGrace"`
	// SourceAllowCIDRs are private ranges the S3 endpoints of
	// credentialsSecretRef sources may resolve to.
	SourceAllowCIDRs []string `json:"sourceAllowCIDRs,omitempty"`
	// CallbackAllowCIDRs are private ranges callbacks may reach (the API
	// checks callback_url against the same ranges).
	CallbackAllowCIDRs []string `json:"callbackAllowCIDRs,omitempty"`
	// LeaderElectionID names the leader election Lease in the operator's
	// namespace, one per installation.
	LeaderElectionID string `json:"leaderElectionID"`
}

// People is the reference people store.
type People struct {
	// URL is bolt:///path.db or postgres://... A URL with a password
	// comes from $PEOPLE_URL. Empty: $PEOPLE_URL, else none (the people
	// services and POST /v5/ei/bulk are off).
	URL string `json:"url,omitempty"`
}

// Installation names the installation's shared objects in the operator's
// namespace.
type Installation struct {
	// ListIDConfigMap is the list ID counter.
	ListIDConfigMap string `json:"listIDConfigMap"`
	// Secrets name the installation secrets by kind (list-id-key,
	// callback-signing, history-key, fraud-history-key). A kind missing
	// here gets its default name.
	Secrets map[string]string `json:"secrets,omitempty"`
	// ExternalSecrets are the kinds the installer provides: the manager
	// waits for them instead of creating them.
	ExternalSecrets []string `json:"externalSecrets,omitempty"`
}
