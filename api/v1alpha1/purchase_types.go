package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The purchase options' rules, which the REST API's purchase checks as well
// (a test checks the CRD's enum and maxItems against these).
const (
	// MaxPurchaseFields is the most fields a purchase may select.
	MaxPurchaseFields = 100
	// MatchIndividual delivers Individual matches only; MatchHousehold
	// (the default) Individual and Household matches.
	MatchIndividual = "I"
	MatchHousehold  = "H"
)

// PurchaseSpec names the list whose results are bought.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable"
type PurchaseSpec struct {
	// ListName is the EmailList, in the Purchase's namespace (a name, never
	// namespace/name: a Purchase cannot reach another namespace's list).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +required
	ListName string `json:"listName"`

	// Fields restricts the delivered result columns to these service
	// columns; the input's own columns are always delivered.
	// +kubebuilder:validation:MaxItems=100
	// +listType=set
	// +optional
	Fields []string `json:"fields,omitempty"`

	// MatchType, for email_append: I delivers Individual matches only, H
	// (the default) Individual and Household matches.
	// +kubebuilder:validation:Enum=I;H
	// +optional
	MatchType string `json:"matchType,omitempty"`
}

// PurchasePhase is the coarse state of a Purchase.
// +kubebuilder:validation:Enum=Pending;Purchased;Failed
type PurchasePhase string

const (
	// PurchasePending: waiting for the list to be processed.
	PurchasePending PurchasePhase = "Pending"
	// PurchasePurchased: the list's results can be downloaded.
	PurchasePurchased PurchasePhase = "Purchased"
	// PurchaseFailed: the list cannot be purchased; see Stalled.
	PurchaseFailed PurchasePhase = "Failed"
)

// PurchaseStatus is observed state.
type PurchaseStatus struct {
	// Phase is the coarse state.
	// +optional
	Phase PurchasePhase `json:"phase,omitempty"`
	// ListID of the purchased list.
	// +optional
	ListID int64 `json:"listID,omitempty"`
	// PurchasedAt is when the list's results became available.
	// +optional
	PurchasedAt *metav1.Time `json:"purchasedAt,omitempty"`
	// ObservedGeneration is the generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready, Reconciling and Stalled.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Purchase buys the results of a list processed with action=report.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=pur,categories=emaildata
// +kubebuilder:printcolumn:name="List",type=string,JSONPath=`.spec.listName`
// +kubebuilder:printcolumn:name="ListID",type=integer,JSONPath=`.status.listID`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Purchase struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec PurchaseSpec `json:"spec"`
	// +optional
	Status PurchaseStatus `json:"status,omitempty"`
}

// PurchaseList is a list of Purchases.
// +kubebuilder:object:root=true
type PurchaseList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Purchase `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Purchase{}, &PurchaseList{})
}
