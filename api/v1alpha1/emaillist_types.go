package v1alpha1

import (
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/emaildata/emaildata/internal/lists/listfile"
	"github.com/emaildata/emaildata/internal/platform/services"
)

// Service names a data service that runs over a list.
// +kubebuilder:validation:Enum=email_validation;email_append;email_intelligence
type Service string

const (
	// ServiceEmailValidation verifies every address in the list.
	ServiceEmailValidation Service = services.EmailValidation
	// ServiceEmailAppend finds email addresses for name and postal records.
	ServiceEmailAppend Service = services.EmailAppend
	// ServiceEmailIntelligence appends demographics to email addresses.
	ServiceEmailIntelligence Service = services.EmailIntelligence
)

// Action says whether results are delivered at once or held until purchased.
// +kubebuilder:validation:Enum=process;report
type Action string

const (
	// ActionProcess processes the list and purchases its results at once.
	ActionProcess Action = "process"
	// ActionReport processes the list and holds results until a Purchase.
	ActionReport Action = "report"
)

// Delimiter names the field separator of a list file.
// +kubebuilder:validation:Enum=comma;pipe;tab
type Delimiter string

const (
	// DelimiterComma separates fields with ','.
	DelimiterComma Delimiter = "comma"
	// DelimiterPipe separates fields with '|'.
	DelimiterPipe Delimiter = "pipe"
	// DelimiterTab separates fields with a tab.
	DelimiterTab Delimiter = "tab"
)

// Byte returns the separator byte. An empty delimiter means
// listfile.DefaultDelimiter (tab), the default of the list API.
func (d Delimiter) Byte() byte {
	b, err := listfile.ParseDelimiter(string(d))
	if err != nil {
		return listfile.DefaultDelimiter
	}
	return b
}

// EmailListSpec is what the user asks for. It is immutable once created.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable; create a new EmailList instead"
// +kubebuilder:validation:XValidation:rule="!(has(self.action) && self.action == 'report' && self.service == 'email_validation')",message="email_validation always runs with action=process"
// +kubebuilder:validation:XValidation:rule="!has(self.verification) || self.service == 'email_validation'",message="verification applies to email_validation lists only"
// +kubebuilder:validation:XValidation:rule="!has(self.callbackSecretRef) || has(self.callbackURL)",message="callbackSecretRef goes with callbackURL"
type EmailListSpec struct {
	// Service is the data service to run over the list.
	// +required
	Service Service `json:"service"`

	// Action is process (the default when omitted) or report.
	// +optional
	Action Action `json:"action,omitempty"`

	// Source says where the list file is.
	// +required
	Source ListSource `json:"source"`

	// Format describes the list file.
	// +required
	Format ListFormat `json:"format"`

	// CallbackURL receives one POST when the list is Processed or Results.
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^https?://`
	// +optional
	CallbackURL string `json:"callbackURL,omitempty"`

	// CallbackSecretRef names a Secret in the list's namespace whose key
	// "secret" holds the key this list's callback is signed with, in the
	// Standard Webhooks form whsec_<base64 of 24 to 64 bytes> (see the
	// webhook-signature header in docs/callbacks.md). Lists the REST API
	// creates are signed with their tenant's key and need none; without
	// it, the callback of a list applied with kubectl is sent unsigned.
	// +optional
	CallbackSecretRef *LocalSecretReference `json:"callbackSecretRef,omitempty"`

	// Verification tunes the email_validation service.
	// +optional
	Verification *VerificationSpec `json:"verification,omitempty"`
}

// VerificationSpec tunes how a list's addresses are verified.
type VerificationSpec struct {
	// MaxAge is the oldest verdict from the verification history the list
	// accepts instead of probing the mailbox again, e.g. "168h"; "0s"
	// probes every address. Omitted: any verdict the history still keeps
	// (its TTLs per outcome: weeks for deliverable and undeliverable,
	// days for catch-all and unverified).
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="maxAge must not be negative"
	// +optional
	MaxAge *metav1.Duration `json:"maxAge,omitempty"`
}

// MaxAge returns the list's maximum age of history verdicts (nil: the
// default).
func (s *EmailListSpec) MaxAge() *time.Duration {
	if s.Verification == nil || s.Verification.MaxAge == nil {
		return nil
	}
	d := s.Verification.MaxAge.Duration
	return &d
}

// EffectiveAction returns the action, defaulting to process.
func (s *EmailListSpec) EffectiveAction() Action {
	if s.Action == "" {
		return ActionProcess
	}
	return s.Action
}

// ListSource names exactly one place the list file comes from.
// +kubebuilder:validation:XValidation:rule="(has(self.uploadKey) ? 1 : 0) + (has(self.configMapKeyRef) ? 1 : 0) + (has(self.blobURL) ? 1 : 0) == 1",message="exactly one of uploadKey, configMapKeyRef or blobURL must be set"
// +kubebuilder:validation:XValidation:rule="!has(self.credentialsSecretRef) || has(self.blobURL)",message="credentialsSecretRef goes with blobURL"
type ListSource struct {
	// UploadKey is a key in the operator's blob store, written by the REST
	// API. It is honoured only for lists the API created, in the API's
	// namespace, under the list's tenant's upload prefix.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	UploadKey string `json:"uploadKey,omitempty"`

	// ConfigMapKeyRef selects a key of a ConfigMap in the list's namespace,
	// for lists kept in Git. Both data and binaryData keys are read.
	// +optional
	ConfigMapKeyRef *ConfigMapKeySelector `json:"configMapKeyRef,omitempty"`

	// BlobURL is the URL of the list file. With credentialsSecretRef it is
	// an object in the namespace's own bucket (s3://bucket/key, optionally
	// ?region=...&endpoint=...), read with the Secret's credentials.
	// Without it, it must lie under the prefix of the operator's store that
	// an administrator granted to the list's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +optional
	BlobURL string `json:"blobURL,omitempty"`

	// CredentialsSecretRef names a Secret in the list's namespace holding
	// the credentials blobURL is read with: AWS_ACCESS_KEY_ID,
	// AWS_SECRET_ACCESS_KEY and optionally AWS_SESSION_TOKEN and
	// AWS_REGION. The operator never lends its own store access.
	// +optional
	CredentialsSecretRef *LocalSecretReference `json:"credentialsSecretRef,omitempty"`
}

// LocalSecretReference names a Secret in the same namespace.
type LocalSecretReference struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
}

// ConfigMapKeySelector selects a key of a ConfigMap in the same namespace.
type ConfigMapKeySelector struct {
	// Name of the ConfigMap.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
	// Key inside the ConfigMap.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Key string `json:"key"`
}

// ListFormat describes the list file.
type ListFormat struct {
	// Name is the file name: a plain name (no directory, not starting
	// with a dot, no control, bidirectional control or line separator
	// character) ending in .csv, .txt or .zip.
	// +kubebuilder:validation:MinLength=5
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:Pattern=`(?i)^[^./\\[:cntrl:]\x{80}-\x{9f}\x{61c}\x{200e}\x{200f}\x{2028}-\x{202e}\x{2066}-\x{2069}][^/\\[:cntrl:]\x{80}-\x{9f}\x{61c}\x{200e}\x{200f}\x{2028}-\x{202e}\x{2066}-\x{2069}]*\.(csv|txt|zip)$`
	// +required
	Name string `json:"name"`

	// EmailColumn is the 1-based position of the email column. When omitted
	// the first column is used.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +optional
	EmailColumn int32 `json:"emailColumn,omitempty"`

	// Header says whether the first row is a header (false when omitted).
	// A pointer, so an explicit false survives every round trip.
	// +optional
	Header *bool `json:"header,omitempty"`

	// Delimiter is comma, pipe or tab (tab when omitted).
	// +optional
	Delimiter Delimiter `json:"delimiter,omitempty"`

	// EscapeFormulas escapes the input's own cells, header included, in
	// the result file, as the columns the service appends always are: a
	// cell a spreadsheet would read as a formula (one starting with =, +,
	// -, @, a tab, CR or LF, or their full-width forms) or starting with a
	// single quote gets a single quote in front and is quoted, so
	// spreadsheets show it as text. Off (the default), the input's data
	// rows are copied byte for byte.
	// +optional
	EscapeFormulas bool `json:"escapeFormulas,omitempty"`
}

// HasHeader reports whether the first row is a header.
func (f *ListFormat) HasHeader() bool { return f.Header != nil && *f.Header }

// Dialect returns how to read the list file, validated once here (the
// CRD's schema already bounds the column, 1 to listfile.MaxColumn), so the
// controller passes it on without naming its parts. An omitted email column
// is the first.
func (f *ListFormat) Dialect() (listfile.Dialect, error) {
	col := listfile.Column(f.EmailColumn)
	if f.EmailColumn < 1 {
		col = listfile.DefaultColumn
	}
	return listfile.NewDialect(f.Delimiter.Byte(), f.HasHeader(), col)
}

// Phase is the coarse state of a list.
// +kubebuilder:validation:Enum=Pending;Processing;Processed;Results;Failed
type Phase string

const (
	// PhasePending: accepted, not yet running.
	PhasePending Phase = "Pending"
	// PhaseProcessing: shards are running.
	PhaseProcessing Phase = "Processing"
	// PhaseProcessed: done; results are held until purchased (action=report).
	PhaseProcessed Phase = "Processed"
	// PhaseResults: done and purchased; the result file can be downloaded.
	PhaseResults Phase = "Results"
	// PhaseFailed: the list cannot be processed; see the Stalled condition.
	PhaseFailed Phase = "Failed"
)

// Condition types, following kstatus.
const (
	ConditionReady       = "Ready"
	ConditionReconciling = "Reconciling"
	ConditionStalled     = "Stalled"
	// ConditionHostLimits says how an email_validation list's pods keep
	// each mail host's politeness limits: shared through the fleet
	// backend, or divided among the pods of the lists running.
	ConditionHostLimits = "HostLimits"
	// ConditionFleetBackend says whether the fleet backend (--fleet-url)
	// answers while an email_validation list runs.
	ConditionFleetBackend = "FleetBackend"
	// ConditionPodsBlocked is True while a worker pod of the run cannot
	// start (an image that cannot be pulled, a container that cannot be
	// created, a pod no node can take); its reason is the kubelet's or the
	// scheduler's. The run fails when it lasts the manager's
	// --pod-start-grace. Absent otherwise.
	ConditionPodsBlocked = "PodsBlocked"
)

// Progress counts rows.
type Progress struct {
	// Done rows.
	Done int64 `json:"done"`
	// Total rows in the list (known once the input is prepared).
	Total int64 `json:"total"`
}

// ResultFile describes the result file in the blob store.
type ResultFile struct {
	// Key of the result object in the blob store.
	Key string `json:"key"`
	// Bytes of the result file.
	Bytes int64 `json:"bytes"`
	// Rows written, excluding the header.
	Rows int64 `json:"rows"`
	// SHA256 of the result file, hex encoded.
	SHA256 string `json:"sha256"`
	// FileName is the download name: <name>-<listID>-<suffix>.<ext>.
	FileName string `json:"fileName"`
}

// DeliveryStatus says which Purchase was applied and what it delivered.
type DeliveryStatus struct {
	// Purchase is the name of the applied Purchase.
	Purchase string `json:"purchase"`
	// Fields are the service columns delivered; empty means all.
	// +optional
	Fields []string `json:"fields,omitempty"`
	// MatchType delivered for email_append (I or H); empty means H.
	// +optional
	MatchType string `json:"matchType,omitempty"`
}

// SameDelivery reports whether a purchase of fields and matchType asks for
// what d delivered. No fields means all of the service's columns (all, when
// known); a list purchased on completion (no Delivery) delivered every
// field with Individual and Household matches.
func SameDelivery(d *DeliveryStatus, fields []string, matchType string, all []string) bool {
	mt := func(s string) string {
		if s == "" {
			return MatchHousehold
		}
		return s
	}
	norm := func(f []string) []string {
		if len(f) == 0 {
			f = all
		}
		f = slices.Clone(f)
		slices.Sort(f)
		return f
	}
	if d == nil {
		d = &DeliveryStatus{}
	}
	return slices.Equal(norm(d.Fields), norm(fields)) && mt(d.MatchType) == mt(matchType)
}

// CallbackStatus records delivery of the completion callback.
type CallbackStatus struct {
	// State is Pending, Delivered or Failed.
	State string `json:"state"`
	// Attempts made so far.
	Attempts int32 `json:"attempts"`
	// LastError of the last failed attempt; never contains response bodies.
	// +optional
	LastError string `json:"lastError,omitempty"`
	// LastAttemptAt is when the last attempt was made.
	// +optional
	LastAttemptAt *metav1.Time `json:"lastAttemptAt,omitempty"`
	// DeliveredStatus is the list status that was announced.
	// +optional
	DeliveredStatus string `json:"deliveredStatus,omitempty"`
}

// Callback states.
const (
	CallbackPending   = "Pending"
	CallbackDelivered = "Delivered"
	CallbackFailed    = "Failed"
)

// EmailListStatus is observed state. It holds small aggregates only: per-row
// data lives in the blob store, because etcd objects are size limited.
type EmailListStatus struct {
	// ListID is the cluster-unique, increasing list number, assigned once.
	// +optional
	ListID int64 `json:"listID,omitempty"`
	// Phase is the coarse state.
	// +optional
	Phase Phase `json:"phase,omitempty"`
	// Records is the number of data rows in the list.
	// +optional
	Records int64 `json:"records,omitempty"`
	// SizeBytes of the submitted file.
	// +optional
	SizeBytes int64 `json:"sizeBytes,omitempty"`
	// Shards the list is split into.
	// +optional
	Shards int32 `json:"shards,omitempty"`
	// Progress of the processing.
	// +optional
	Progress *Progress `json:"progress,omitempty"`
	// ProgressText renders progress for printer columns, e.g. "40/100".
	// +optional
	ProgressText string `json:"progressText,omitempty"`
	// Reporting holds aggregated counts per field, e.g.
	// {"email_match_type": {"Individual match": 3}}.
	// +optional
	Reporting map[string]map[string]int64 `json:"reporting,omitempty"`
	// Pacing says why the list took the time it did (email_validation):
	// the mail host whose work took longest, set with the result.
	// +optional
	Pacing *Pacing `json:"pacing,omitempty"`
	// Result file, once written.
	// +optional
	Result *ResultFile `json:"result,omitempty"`
	// Purchased is true once results may be downloaded.
	// +optional
	Purchased bool `json:"purchased,omitempty"`
	// Delivery records what a Purchase chose to deliver (action=report).
	// +optional
	Delivery *DeliveryStatus `json:"delivery,omitempty"`
	// StartedAt is when processing started.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// CompletedAt is when processing finished.
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
	// Callback delivery state, when a callbackURL is set.
	// +optional
	Callback *CallbackStatus `json:"callback,omitempty"`
	// ObservedGeneration is the generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready, Reconciling and Stalled (kstatus), and PodsBlocked
	// while a worker pod cannot start.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// EmailList is a list file and the data service that runs over it.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=el;elist,categories=emaildata
// +kubebuilder:printcolumn:name="ListID",type=integer,JSONPath=`.status.listID`
// +kubebuilder:printcolumn:name="Service",type=string,JSONPath=`.spec.service`
// +kubebuilder:printcolumn:name="Action",type=string,JSONPath=`.spec.action`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Progress",type=string,JSONPath=`.status.progressText`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`,priority=1
type EmailList struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec EmailListSpec `json:"spec"`
	// +optional
	Status EmailListStatus `json:"status,omitempty"`
}

// EmailListList is a list of EmailLists.
// +kubebuilder:object:root=true
type EmailListList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EmailList `json:"items"`
}

func init() {
	SchemeBuilder.Register(&EmailList{}, &EmailListList{})
}

// Pacing is what paced a list: one mail host, no row data.
type Pacing struct {
	// Host is the mail host address (ip:port) whose work took longest.
	Host string `json:"host"`
	// Span is the time from its first session to its last reply.
	Span metav1.Duration `json:"span"`
	// Floor is the least time the host's own limits allow for that work.
	Floor metav1.Duration `json:"floor"`
	// Reason is the limit that sets the floor: greylisting, connection
	// rate, connections a window, or concurrency (session time, error
	// sleeps, reply delays); empty when no limit was met.
	// +optional
	Reason string `json:"reason,omitempty"`
}
