package v1alpha1

// Labels the REST API puts on the lists it creates; the controller honours
// a list's uploadKey only with them (and only in the API's namespace).
const (
	// LabelTenant carries an opaque digest of the tenant that submitted the
	// list; its uploads live under uploads/<digest>/.
	LabelTenant = "emaildata.io/tenant"
	// LabelManagedBy marks who created the object.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByAPI is LabelManagedBy's value on lists the REST API created.
	ManagedByAPI = "emaildata-api"
	// ListIDLabel carries a list ID that the REST API allocated at submission.
	// The controller adopts it only for a list the API created (its
	// namespace, LabelManagedBy) whose ID the counter reserved for that
	// list's name (internal/lists/listid); anywhere else the label is ignored,
	// with a Warning event, and status.listID is the operator's.
	ListIDLabel = "lists.emaildata.io/list-id"
)
