package restapi

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/platform/services"
)

// TenantIndex indexes EmailLists in the API's cache by their tenant label,
// so that GET /v5/lists reads one tenant's lists without walking the
// namespace's.
const TenantIndex = "metadata.labels.tenant"

// IndexTenant is the indexer function for TenantIndex: the tenant label of
// lists that carry a list ID (the API's own lists).
func IndexTenant(o client.Object) []string {
	l := o.GetLabels()
	if _, ok := l[listsv1.ListIDLabel]; !ok || l[TenantLabel] == "" {
		return nil
	}
	return []string{l[TenantLabel]}
}

// Paging of GET /v5/lists.
const (
	DefaultListsPage = 50
	MaxListsPage     = 500
)

// listSummary is one entry of GET /v5/lists.
type listSummary struct {
	ListID    int64  `json:"list_id"`
	Name      string `json:"name"`
	Service   string `json:"service"`
	Action    string `json:"action"`
	Status    string `json:"status"`
	Records   int64  `json:"records"`
	SizeBytes int64  `json:"size_bytes"`
	Done      int64  `json:"completed_count"`
	CreatedAt string `json:"created_at"`
	StartedAt string `json:"started_at,omitempty"`
	Purchased bool   `json:"purchased"`
}

// listsPage is the GET /v5/lists response.
type listsPage struct {
	Lists []listSummary `json:"lists"`
	// NextCursor continues after the last list; absent on the last page.
	NextCursor string `json:"next_cursor,omitempty"`
}

// listCursor is a position in the newest-first order: the created time
// (whole seconds, as the API server keeps it) and the list ID, which
// breaks ties. A cursor rather than an offset, so that lists submitted
// while a client pages do not shift the pages under it.
type listCursor struct {
	created int64
	id      int64
}

func (c listCursor) String() string { return fmt.Sprintf("%d.%d", c.created, c.id) }

func parseCursor(s string) (listCursor, bool) {
	a, b, ok := strings.Cut(s, ".")
	created, err1 := strconv.ParseInt(a, 10, 64)
	id, err2 := strconv.ParseInt(b, 10, 64)
	return listCursor{created, id}, ok && err1 == nil && err2 == nil && id > 0
}

// before reports whether c comes before d in the newest-first order.
func (c listCursor) before(d listCursor) bool {
	return c.created > d.created || c.created == d.created && c.id > d.id
}

// listIndex serves GET /v5/lists: the caller's tenant's lists of the
// services its key is enabled for (a list the key could not read is not
// listed either), newest first, limit at a time. Another tenant's lists
// are never read: the cache is asked for the tenant's label only.
func (s *Server) listIndex(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := DefaultListsPage
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxListsPage {
			writeError(w, r, http.StatusBadRequest, "BadRequest", fmt.Sprintf("limit %q must be an integer from 1 to %d", truncate(v, 20), MaxListsPage))
			return
		}
		limit = n
	}
	var after *listCursor
	if v := q.Get("cursor"); v != "" {
		c, ok := parseCursor(v)
		if !ok {
			writeError(w, r, http.StatusBadRequest, "BadRequest", "cursor is not one this API handed out (next_cursor of a previous page)")
			return
		}
		after = &c
	}
	k := keyFrom(r.Context())
	var lists listsv1.EmailListList
	if err := s.client.List(r.Context(), &lists, client.InNamespace(s.cfg.Namespace),
		client.MatchingFields{TenantIndex: tenantLabel(k.Tenant)}); err != nil {
		s.internalError(w, r, "list lists", err)
		return
	}
	type entry struct {
		pos listCursor
		l   *listsv1.EmailList
	}
	want := tenantLabel(k.Tenant)
	var entries []entry
	for i := range lists.Items {
		l := &lists.Items[i]
		// The label is checked again: the index is the cache's, the rule is ours.
		if l.Labels[TenantLabel] != want || !l.DeletionTimestamp.IsZero() || !k.Enabled(string(l.Spec.Service)) {
			continue
		}
		e := entry{listCursor{l.CreationTimestamp.Unix(), statusBody(l).ListID}, l}
		if e.pos.id > 0 && (after == nil || after.before(e.pos)) {
			entries = append(entries, e)
		}
	}
	slices.SortFunc(entries, func(a, b entry) int {
		return cmp.Or(cmp.Compare(b.pos.created, a.pos.created), cmp.Compare(b.pos.id, a.pos.id))
	})
	page := listsPage{Lists: []listSummary{}}
	for i, e := range entries {
		if i == limit {
			page.NextCursor = entries[i-1].pos.String()
			break
		}
		page.Lists = append(page.Lists, summarize(e.l))
	}
	writeJSON(w, http.StatusOK, page)
}

// summarize is a list's index entry, in the words of its status (statusBody).
func summarize(l *listsv1.EmailList) listSummary {
	b := statusBody(l)
	svc := b.Services[string(l.Spec.Service)]
	out := listSummary{
		ListID: b.ListID, Name: b.Name, Service: string(l.Spec.Service), Action: b.Action, Status: b.Status,
		Records: b.Records, SizeBytes: b.SizeBytes, Done: svc.CompletedCount, CreatedAt: b.CreatedAt,
		Purchased: l.Status.Phase == listsv1.PhaseResults,
	}
	if st := l.Status.StartedAt; st != nil {
		out.StartedAt = st.UTC().Format(time.RFC3339)
	}
	return out
}

// keyInfo is the GET /v5/key response.
type keyInfo struct {
	// Services the key is enabled for, in services.Known's order.
	Services []string `json:"services"`
	// ListServices are those of Services that run over lists.
	ListServices []string `json:"list_services"`
	// Purchasable are those of ListServices that take action=report.
	Purchasable []string `json:"purchasable"`
}

// keyServices serves GET /v5/key: what the presented key may do, so that a
// client (the console) offers only that. It says nothing of the tenant or
// of other keys.
func (s *Server) keyServices(w http.ResponseWriter, r *http.Request) {
	k := keyFrom(r.Context())
	info := keyInfo{Services: []string{}, ListServices: []string{}, Purchasable: []string{}}
	for _, svc := range services.Known {
		if !k.Enabled(svc) {
			continue
		}
		info.Services = append(info.Services, svc)
		if isListService(svc) {
			info.ListServices = append(info.ListServices, svc)
		}
		if services.Purchasable(svc) {
			info.Purchasable = append(info.Purchasable, svc)
		}
	}
	writeJSON(w, http.StatusOK, info)
}
