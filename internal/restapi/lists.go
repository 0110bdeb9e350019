package restapi

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
)

// TenantLabel marks a list with an opaque digest of the tenant that submitted it.
const TenantLabel = listsv1.LabelTenant

// ListIDIndex indexes EmailLists in the API's cache by their tenant and
// list-id labels together (tenantListKey), so that a lookup finds only the
// caller's tenant's lists: another tenant's list costs exactly what a
// missing ID costs, and the time of an answer cannot tell them apart.
const ListIDIndex = "metadata.labels.tenant-list-id"

// IndexListID is the indexer function for ListIDIndex.
func IndexListID(o client.Object) []string {
	l := o.GetLabels()
	id, ok := l[listsv1.ListIDLabel]
	if !ok {
		return nil
	}
	return []string{tenantListKey(l[TenantLabel], id)}
}

// tenantListKey is the ListIDIndex value of list id of a tenant's label.
func tenantListKey(tenant, id string) string { return tenant + "/" + id }

// tenantLabel turns a tenant name into a label value: a digest, so any
// tenant name fits and none is exposed in labels.
func tenantLabel(tenant string) string {
	sum := sha256.Sum256([]byte("tenant:" + tenant))
	return hex.EncodeToString(sum[:16])
}

var errNotFound = errors.New("not found")

// listHandler serves a call on one list, which listCall has loaded and
// checked: the caller's tenant's, of a service the caller's key is enabled for.
type listHandler func(w http.ResponseWriter, r *http.Request, l *listsv1.EmailList)

// notFoundAnswer answers a list_id for which the caller has no list.
type notFoundAnswer func(w http.ResponseWriter, r *http.Request, id int64)

// listCall is how every /v5/list/{list_id} route reaches its list, so that
// no list call can skip a check. In order: the key (the api_key header);
// the list_id; the list, among the key's tenant's only (another tenant's
// list is answered by notFound exactly like a missing one, so list IDs
// reveal nothing across tenants); and the key enabled for the list's
// service (else 403 naming the service, as a submission is answered: a key
// of the tenant sees that the list exists, nothing more).
func (s *Server) listCall(notFound notFoundAnswer, next listHandler) http.HandlerFunc {
	return s.listKey(nil, func(w http.ResponseWriter, r *http.Request) {
		raw := r.PathValue("list_id")
		id, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || id <= 0 {
			writeError(w, r, http.StatusBadRequest, "BadRequest", fmt.Sprintf("list_id %q is not a positive integer", truncate(raw, 40)))
			return
		}
		k := keyFrom(r.Context())
		l, err := s.lookup(r.Context(), id, k.Tenant)
		if errors.Is(err, errNotFound) {
			notFound(w, r, id)
			return
		}
		if err != nil {
			s.internalError(w, r, "look up list", err)
			return
		}
		if svc := string(l.Spec.Service); !k.Enabled(svc) {
			s.forbid(w, r, k, svc, refuseHeaderJSON)
			return
		}
		next(w, r, l)
	})
}

// listNotFound is the status and purchase calls' answer: plain text, as the
// published API answers.
func listNotFound(w http.ResponseWriter, _ *http.Request, id int64) {
	writeText(w, http.StatusNotFound, fmt.Sprintf("List not found: %d", id))
}

// lookup reads the informer cache. On a miss it asks the API server once,
// so a list is visible right after its submission on any replica, before
// the cache has caught up (misses are bounded by the key's rate limit).
// Both reads ask for the tenant's lists with the ID only: for an ID that
// is another tenant's they do the same work, and find the same nothing, as
// for an ID that does not exist (ListIDIndex).
func (s *Server) lookup(ctx context.Context, id int64, tenant string) (*listsv1.EmailList, error) {
	idStr := strconv.FormatInt(id, 10)
	want := tenantLabel(tenant)
	var lists listsv1.EmailListList
	if err := s.client.List(ctx, &lists, client.InNamespace(s.cfg.Namespace), client.MatchingFields{ListIDIndex: tenantListKey(want, idStr)}); err != nil {
		return nil, err
	}
	if l := pick(&lists, want, id); l != nil {
		return l, nil
	}
	if s.live == nil {
		return nil, errNotFound
	}
	if err := s.live.List(ctx, &lists, client.InNamespace(s.cfg.Namespace),
		client.MatchingLabels{listsv1.ListIDLabel: idStr, TenantLabel: want}); err != nil {
		return nil, err
	}
	if l := pick(&lists, want, id); l != nil {
		return l, nil
	}
	return nil, errNotFound
}

// pick chooses among the tenant's lists labelled id: the one whose status
// holds id, else one not yet given an ID. A list whose label the
// controller refused (status holds another ID) is taken last: only an
// operator can create one in the API's namespace.
func pick(lists *listsv1.EmailListList, tenant string, id int64) *listsv1.EmailList {
	var unassigned, refused *listsv1.EmailList
	for i := range lists.Items {
		l := &lists.Items[i]
		if l.Labels[TenantLabel] != tenant || !l.DeletionTimestamp.IsZero() {
			continue
		}
		switch l.Status.ListID {
		case id:
			return l
		case 0:
			unassigned = cmp.Or(unassigned, l)
		default:
			refused = cmp.Or(refused, l)
		}
	}
	return cmp.Or(unassigned, refused)
}

// serviceStatus is one entry of a status response's services map.
type serviceStatus struct {
	InputCount     int64                       `json:"input_count"`
	CompletedCount int64                       `json:"completed_count"`
	Status         string                      `json:"status"`
	Reporting      map[string]map[string]int64 `json:"reporting,omitempty"`
	Error          string                      `json:"error,omitempty"`
}

// listStatusBody is the GET /v5/list/{list_id} response.
type listStatusBody struct {
	ListID    int64                       `json:"list_id"`
	Name      string                      `json:"name"`
	Status    string                      `json:"status"`
	Records   int64                       `json:"records"`
	SizeBytes int64                       `json:"size_bytes"`
	CreatedAt string                      `json:"created_at"`
	Action    string                      `json:"action"`
	Services  map[string]serviceStatus    `json:"services"`
	Reporting map[string]map[string]int64 `json:"reporting,omitempty"`
}

func (s *Server) listStatus(w http.ResponseWriter, _ *http.Request, l *listsv1.EmailList) {
	writeJSON(w, http.StatusOK, statusBody(l))
}

func statusBody(l *listsv1.EmailList) listStatusBody {
	st := l.Status
	svc := serviceStatus{InputCount: st.Records, Status: "Pending"}
	if st.Progress != nil {
		svc.CompletedCount = st.Progress.Done
	}
	status := "Pending"
	switch st.Phase {
	case listsv1.PhaseProcessing:
		status, svc.Status = "Processing", "Processing"
	case listsv1.PhaseProcessed:
		status, svc.Status, svc.Reporting = "Processed", "Completed", st.Reporting
	case listsv1.PhaseResults:
		status, svc.Status, svc.Reporting = "Results", "Completed", st.Reporting
	case listsv1.PhaseFailed:
		status, svc.Status = "Failed", "Error"
		for _, c := range st.Conditions {
			if c.Type == listsv1.ConditionStalled {
				svc.Error = c.Message
			}
		}
	}
	body := listStatusBody{
		ListID:    st.ListID,
		Name:      l.Spec.Format.Name,
		Status:    status,
		Records:   st.Records,
		SizeBytes: st.SizeBytes,
		CreatedAt: l.CreationTimestamp.UTC().Format(time.RFC3339),
		Action:    string(l.Spec.EffectiveAction()),
		Services:  map[string]serviceStatus{string(l.Spec.Service): svc},
	}
	if body.ListID == 0 {
		body.ListID, _ = strconv.ParseInt(l.Labels[listsv1.ListIDLabel], 10, 64)
	}
	if st.Phase == listsv1.PhaseProcessed && l.Spec.EffectiveAction() == listsv1.ActionReport {
		body.Reporting = st.Reporting
		if body.Reporting == nil {
			body.Reporting = map[string]map[string]int64{}
		}
	}
	return body
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return strings.ToValidUTF8(s, "?")
}
