// Package builders makes the three kinds (EmailList, Purchase, Dataset) for
// tests, typed and chained: MakeEmailList(ns, name).Service(...).Obj().
// Each Make gives a minimal valid object; each method sets one thing and
// returns the wrapper; Obj returns a copy, so one wrapper can make several
// objects. It is a test kit: only tests and hack/ import it
// (internal/kits/archtest).
package builders

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
)

// What the wrappers set alike on their object's metadata.
func uid(m *metav1.ObjectMeta, u string)        { m.UID = types.UID(u) }
func created(m *metav1.ObjectMeta, t time.Time) { m.CreationTimestamp = metav1.NewTime(t) }
func labels(m *metav1.ObjectMeta, kv []string) {
	if m.Labels == nil {
		m.Labels = map[string]string{}
	}
	for i := 0; i+1 < len(kv); i += 2 {
		m.Labels[kv[i]] = kv[i+1]
	}
}

// EmailListWrapper builds an EmailList.
type EmailListWrapper struct{ listsv1.EmailList }

// MakeEmailList returns an email_validation list of a comma-separated
// list.csv, without a source.
func MakeEmailList(ns, name string) *EmailListWrapper {
	return &EmailListWrapper{listsv1.EmailList{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: listsv1.EmailListSpec{
			Service: listsv1.ServiceEmailValidation,
			Format:  listsv1.ListFormat{Name: "list.csv", Delimiter: listsv1.DelimiterComma},
		},
	}}
}

// Obj returns a copy of the list.
func (w *EmailListWrapper) Obj() *listsv1.EmailList { return w.DeepCopy() }

// Service sets the data service.
func (w *EmailListWrapper) Service(s listsv1.Service) *EmailListWrapper {
	w.Spec.Service = s
	return w
}

// Action sets process or report.
func (w *EmailListWrapper) Action(a listsv1.Action) *EmailListWrapper {
	w.Spec.Action = a
	return w
}

// FileName sets the list file's name.
func (w *EmailListWrapper) FileName(name string) *EmailListWrapper {
	w.Spec.Format.Name = name
	return w
}

// Header says the first row is a header.
func (w *EmailListWrapper) Header() *EmailListWrapper {
	h := true
	w.Spec.Format.Header = &h
	return w
}

// EmailColumn sets the 1-based email column.
func (w *EmailListWrapper) EmailColumn(c int32) *EmailListWrapper {
	w.Spec.Format.EmailColumn = c
	return w
}

// Delimiter sets the field separator.
func (w *EmailListWrapper) Delimiter(d listsv1.Delimiter) *EmailListWrapper {
	w.Spec.Format.Delimiter = d
	return w
}

// CallbackURL sets the completion callback.
func (w *EmailListWrapper) CallbackURL(u string) *EmailListWrapper {
	w.Spec.CallbackURL = u
	return w
}

// CallbackSecret signs the callback with the key in Secret name.
func (w *EmailListWrapper) CallbackSecret(name string) *EmailListWrapper {
	w.Spec.CallbackSecretRef = &listsv1.LocalSecretReference{Name: name}
	return w
}

// EscapeFormulas escapes the input's formula cells in the result.
func (w *EmailListWrapper) EscapeFormulas() *EmailListWrapper {
	w.Spec.Format.EscapeFormulas = true
	return w
}

// MaxAge sets the oldest history verdict the list accepts.
func (w *EmailListWrapper) MaxAge(d time.Duration) *EmailListWrapper {
	w.Spec.Verification = &listsv1.VerificationSpec{MaxAge: &metav1.Duration{Duration: d}}
	return w
}

// ConfigMap reads the list from key of ConfigMap name.
func (w *EmailListWrapper) ConfigMap(name, key string) *EmailListWrapper {
	w.Spec.Source.ConfigMapKeyRef = &listsv1.ConfigMapKeySelector{Name: name, Key: key}
	return w
}

// UploadKey reads the list from an upload in the operator's store, without
// the labels the REST API puts on its lists (see APIUpload).
func (w *EmailListWrapper) UploadKey(key string) *EmailListWrapper {
	w.Spec.Source.UploadKey = key
	return w
}

// APIUpload makes the list one the REST API created for tenant: its
// upload key and the API's labels, which uploadKey lists need.
func (w *EmailListWrapper) APIUpload(key, tenant string) *EmailListWrapper {
	return w.UploadKey(key).Labels(listsv1.LabelManagedBy, listsv1.ManagedByAPI, listsv1.LabelTenant, tenant)
}

// BlobURL reads the list from a URL.
func (w *EmailListWrapper) BlobURL(u string) *EmailListWrapper {
	w.Spec.Source.BlobURL = u
	return w
}

// Credentials reads the blob URL with the credentials of Secret name.
func (w *EmailListWrapper) Credentials(secret string) *EmailListWrapper {
	w.Spec.Source.CredentialsSecretRef = &listsv1.LocalSecretReference{Name: secret}
	return w
}

// Labels adds labels, given as key, value pairs.
func (w *EmailListWrapper) Labels(kv ...string) *EmailListWrapper {
	labels(&w.ObjectMeta, kv)
	return w
}

// UID sets the UID, which names the list's blobs.
func (w *EmailListWrapper) UID(u string) *EmailListWrapper {
	uid(&w.ObjectMeta, u)
	return w
}

// Generation sets metadata.generation.
func (w *EmailListWrapper) Generation(g int64) *EmailListWrapper {
	w.ObjectMeta.Generation = g
	return w
}

// Created sets the creation time, from which the source grace runs.
func (w *EmailListWrapper) Created(t time.Time) *EmailListWrapper {
	created(&w.ObjectMeta, t)
	return w
}

// Finalizers sets the finalizers.
func (w *EmailListWrapper) Finalizers(f ...string) *EmailListWrapper {
	w.ObjectMeta.Finalizers = f
	return w
}

// ListID sets status.listID.
func (w *EmailListWrapper) ListID(id int64) *EmailListWrapper {
	w.EmailList.Status.ListID = id
	return w
}

// Phase sets status.phase.
func (w *EmailListWrapper) Phase(p listsv1.Phase) *EmailListWrapper {
	w.EmailList.Status.Phase = p
	return w
}

// Prepared sets what preparation records: the rows and the shards.
func (w *EmailListWrapper) Prepared(records int64, shards int32) *EmailListWrapper {
	w.EmailList.Status.Records, w.EmailList.Status.Shards = records, shards
	return w
}

// Purchased marks the results downloadable.
func (w *EmailListWrapper) Purchased() *EmailListWrapper {
	w.EmailList.Status.Purchased = true
	return w
}

// Delivery records what a Purchase delivered.
func (w *EmailListWrapper) Delivery(d listsv1.DeliveryStatus) *EmailListWrapper {
	w.EmailList.Status.Delivery = &d
	return w
}

// Conditions sets status.conditions.
func (w *EmailListWrapper) Conditions(c ...metav1.Condition) *EmailListWrapper {
	w.EmailList.Status.Conditions = c
	return w
}

// PurchaseWrapper builds a Purchase.
type PurchaseWrapper struct{ listsv1.Purchase }

// MakePurchase returns a Purchase of list (a name in ns).
func MakePurchase(ns, name, list string) *PurchaseWrapper {
	return &PurchaseWrapper{listsv1.Purchase{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       listsv1.PurchaseSpec{ListName: list},
	}}
}

// Obj returns a copy of the Purchase.
func (w *PurchaseWrapper) Obj() *listsv1.Purchase { return w.DeepCopy() }

// Fields restricts the delivered service columns.
func (w *PurchaseWrapper) Fields(f ...string) *PurchaseWrapper {
	w.Spec.Fields = f
	return w
}

// MatchType sets I or H.
func (w *PurchaseWrapper) MatchType(mt string) *PurchaseWrapper {
	w.Spec.MatchType = mt
	return w
}

// Generation sets metadata.generation.
func (w *PurchaseWrapper) Generation(g int64) *PurchaseWrapper {
	w.ObjectMeta.Generation = g
	return w
}

// Phase sets status.phase.
func (w *PurchaseWrapper) Phase(p listsv1.PurchasePhase) *PurchaseWrapper {
	w.Purchase.Status.Phase = p
	return w
}

// DatasetWrapper builds a Dataset.
type DatasetWrapper struct{ listsv1.Dataset }

// MakeDataset returns a Dataset without a source.
func MakeDataset(ns, name string) *DatasetWrapper {
	return &DatasetWrapper{listsv1.Dataset{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}}
}

// Obj returns a copy of the Dataset.
func (w *DatasetWrapper) Obj() *listsv1.Dataset { return w.DeepCopy() }

// ConfigMap loads key of ConfigMap name.
func (w *DatasetWrapper) ConfigMap(name, key string) *DatasetWrapper {
	w.Spec.Source.ConfigMapKeyRef = &listsv1.ConfigMapKeySelector{Name: name, Key: key}
	return w
}

// BlobURL loads an object of the operator's store.
func (w *DatasetWrapper) BlobURL(u string) *DatasetWrapper {
	w.Spec.Source.BlobURL = u
	return w
}

// ContinueOnError sets whether malformed rows are skipped.
func (w *DatasetWrapper) ContinueOnError(b bool) *DatasetWrapper {
	w.Spec.ContinueOnError = &b
	return w
}

// MaxErrors bounds the malformed rows skipped.
func (w *DatasetWrapper) MaxErrors(n int32) *DatasetWrapper {
	w.Spec.MaxErrors = n
	return w
}

// UID sets the UID, which names the Dataset's blobs.
func (w *DatasetWrapper) UID(u string) *DatasetWrapper {
	uid(&w.ObjectMeta, u)
	return w
}

// Generation sets metadata.generation.
func (w *DatasetWrapper) Generation(g int64) *DatasetWrapper {
	w.ObjectMeta.Generation = g
	return w
}

// Created sets the creation time, from which the source grace runs.
func (w *DatasetWrapper) Created(t time.Time) *DatasetWrapper {
	created(&w.ObjectMeta, t)
	return w
}

// Phase sets status.phase.
func (w *DatasetWrapper) Phase(p listsv1.DatasetPhase) *DatasetWrapper {
	w.Dataset.Status.Phase = p
	return w
}
