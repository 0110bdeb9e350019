package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MaxDatasetErrors is the most row errors kept in a Dataset's status.
const MaxDatasetErrors = 20

// DatasetSpec is what the user asks for. It is immutable once created.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable; create a new Dataset instead"
type DatasetSpec struct {
	// Source says where the people file is: a CSV file with a header row
	// whose column names are those of the reference people store (any
	// subset that includes email, in any order; alt_emails lists a
	// person's other addresses separated by ';'). A file whose header has
	// a phone column and no email column is phone status data instead
	// (columns phone, country, status, prepaid, connected_score).
	// +required
	Source DatasetSource `json:"source"`

	// ContinueOnError skips malformed rows, counting them in status.failed,
	// instead of stopping the load at the first one.
	// A pointer, so an explicit false survives every round trip.
	// +optional
	ContinueOnError *bool `json:"continueOnError,omitempty"`

	// MaxErrors bounds the malformed rows skipped with continueOnError; one
	// more fails the load. The importer's default (100) applies when
	// omitted.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	MaxErrors int32 `json:"maxErrors,omitempty"`
}

// ContinuesOnError reports whether malformed rows are skipped.
func (s *DatasetSpec) ContinuesOnError() bool { return s.ContinueOnError != nil && *s.ContinueOnError }

// DatasetSource names exactly one place the people file comes from.
// +kubebuilder:validation:XValidation:rule="(has(self.configMapKeyRef) ? 1 : 0) + (has(self.blobURL) ? 1 : 0) == 1",message="exactly one of configMapKeyRef or blobURL must be set"
type DatasetSource struct {
	// ConfigMapKeyRef selects a key of a ConfigMap in the Dataset's
	// namespace, for small data sets kept in Git. Both data and binaryData
	// keys are read.
	// +optional
	ConfigMapKeyRef *ConfigMapKeySelector `json:"configMapKeyRef,omitempty"`

	// BlobURL is the URL of an object inside the operator's configured blob
	// store, for example s3://bucket/imports/people.csv.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +optional
	BlobURL string `json:"blobURL,omitempty"`
}

// DatasetPhase is the coarse state of a Dataset.
// +kubebuilder:validation:Enum=Pending;Loading;Loaded;Failed
type DatasetPhase string

const (
	// DatasetPending: accepted, the source is being resolved.
	DatasetPending DatasetPhase = "Pending"
	// DatasetLoading: the import runs.
	DatasetLoading DatasetPhase = "Loading"
	// DatasetLoaded: the import finished; malformed rows, if any, were
	// skipped (continueOnError) and are counted in status.failed.
	DatasetLoaded DatasetPhase = "Loaded"
	// DatasetFailed: the import stopped; see the Stalled condition. Rows
	// before the one that stopped it may have been written.
	DatasetFailed DatasetPhase = "Failed"
)

// DatasetStatus is observed state.
type DatasetStatus struct {
	// Phase is the coarse state.
	// +optional
	Phase DatasetPhase `json:"phase,omitempty"`
	// Rows is the number of data rows read, malformed ones included.
	// +optional
	Rows int64 `json:"rows,omitempty"`
	// Imported is the number of rows written to the people store.
	// +optional
	Imported int64 `json:"imported,omitempty"`
	// Failed is the number of malformed rows.
	// +optional
	Failed int64 `json:"failed,omitempty"`
	// Errors of the first malformed rows, e.g. "line 7: email: invalid
	// email address"; they name lines and columns, never row contents.
	// +kubebuilder:validation:MaxItems=20
	// +optional
	Errors []string `json:"errors,omitempty"`
	// StartedAt is when the import started.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// CompletedAt is when the import finished (Loaded or Failed).
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
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

// Dataset loads a people file into the reference people store that
// email_intelligence and email_append read. Loading upserts by email, so
// loading the same file again is harmless. The people store is shared by
// every namespace, so Datasets are honoured only in the operator's
// namespace, where only administrators can create them.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=pds,categories=emaildata
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Imported",type=integer,JSONPath=`.status.imported`
// +kubebuilder:printcolumn:name="Failed",type=integer,JSONPath=`.status.failed`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Dataset struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec DatasetSpec `json:"spec"`
	// +optional
	Status DatasetStatus `json:"status,omitempty"`
}

// DatasetList is a list of Datasets.
// +kubebuilder:object:root=true
type DatasetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Dataset `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Dataset{}, &DatasetList{})
}
