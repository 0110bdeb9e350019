package restapi_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"testing"
	"time"
)

type listEntry struct {
	ListID    int64  `json:"list_id"`
	Name      string `json:"name"`
	Service   string `json:"service"`
	Action    string `json:"action"`
	Status    string `json:"status"`
	CreatedAt string `json:"created_at"`
}

// allLists pages through GET /v5/lists with key, limit at a time, and
// checks each page's shape, order and headers on the way.
func allLists(t *testing.T, key string, limit int) []listEntry {
	t.Helper()
	var out []listEntry
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatal("GET /v5/lists does not end")
		}
		v := url.Values{"limit": {strconv.Itoa(limit)}}
		if cursor != "" {
			v.Set("cursor", cursor)
		}
		r := do(t, newRequest(t, http.MethodGet, "/v5/lists?"+v.Encode(), key, nil, ""))
		if r.code != http.StatusOK {
			t.Fatalf("GET /v5/lists: %d %s", r.code, r.body)
		}
		if cc := r.header.Get("Cache-Control"); cc != "no-store" {
			t.Errorf("GET /v5/lists: Cache-Control %q, want no-store", cc)
		}
		var page struct {
			Lists      []listEntry `json:"lists"`
			NextCursor string      `json:"next_cursor"`
		}
		if err := json.Unmarshal(r.body, &page); err != nil {
			t.Fatal(err)
		}
		if len(page.Lists) > limit || page.NextCursor != "" && len(page.Lists) != limit {
			t.Fatalf("page of %d lists with limit %d and next_cursor %q", len(page.Lists), limit, page.NextCursor)
		}
		out = append(out, page.Lists...)
		if cursor = page.NextCursor; cursor == "" {
			return out
		}
	}
}

// TestListIndexTenants: GET /v5/lists shows a tenant's lists, newest first,
// paged without loss or repeat, only of the services the key is enabled
// for, and never another tenant's; both tenants submit lists here.
func TestListIndexTenants(t *testing.T) {
	rows := []byte("a@good.test\nb@good.test\n")
	acmeEV := listID(t, submit(t, keyAcme, nil, "index-acme-1.csv", rows))
	acmeEI := listID(t, submit(t, keyMulti, q("service", "email_intelligence", "action", "report"), "index-acme-2.csv", rows))
	globex := []int64{
		listID(t, submit(t, keyGlobex, nil, "index-globex-1.csv", rows)),
		listID(t, submit(t, keyGlobex, nil, "index-globex-2.csv", rows)),
	}
	time.Sleep(1100 * time.Millisecond) // a later second of created time
	acmeLast := listID(t, submit(t, keyAcme, nil, "index-acme-3.csv", rows))
	mine := map[int64]string{acmeEV: "email_validation", acmeEI: "email_intelligence", acmeLast: "email_validation"}

	// The cache may lag a submission by a moment.
	var multi []listEntry
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		multi = allLists(t, keyMulti, 2)
		if countIDs(multi, mine) == len(mine) || time.Now().After(deadline) {
			break
		}
	}
	if n := countIDs(multi, mine); n != len(mine) {
		t.Fatalf("acme's multi-service key lists %d of its 3 new lists: %v", n, multi)
	}
	seen := map[int64]bool{}
	for i, e := range multi {
		if seen[e.ListID] {
			t.Errorf("list %d listed twice across pages", e.ListID)
		}
		seen[e.ListID] = true
		if slices.Contains(globex, e.ListID) {
			t.Errorf("acme's key lists globex's list %d", e.ListID)
		}
		if i > 0 && multi[i-1].CreatedAt < e.CreatedAt {
			t.Errorf("list %d (%s) after the older list %d (%s)", e.ListID, e.CreatedAt, multi[i-1].ListID, multi[i-1].CreatedAt)
		}
		if svc, ok := mine[e.ListID]; ok && e.Service != svc {
			t.Errorf("list %d: service %q, want %q", e.ListID, e.Service, svc)
		}
		if e.ListID == acmeEI && (e.Action != "report" || e.Name != "index-acme-2.csv") {
			t.Errorf("list %d: %+v, want action report, name index-acme-2.csv", e.ListID, e)
		}
	}
	if pos(multi, acmeLast) > pos(multi, acmeEV) {
		t.Errorf("the newest list %d comes after the older %d", acmeLast, acmeEV)
	}

	// A key of the tenant for email_validation only: not the intelligence list.
	ev := allLists(t, keyAcme, 50)
	if pos(ev, acmeEV) < 0 || pos(ev, acmeLast) < 0 || pos(ev, acmeEI) >= 0 {
		t.Errorf("acme's validation key lists %v; want %d and %d, not %d", ev, acmeEV, acmeLast, acmeEI)
	}
	for _, e := range ev {
		if e.Service != "email_validation" {
			t.Errorf("acme's validation key lists a %s list %d", e.Service, e.ListID)
		}
	}

	// The other tenant: its own lists, none of acme's.
	g := allLists(t, keyGlobex, 500)
	for _, id := range globex {
		if pos(g, id) < 0 {
			t.Errorf("globex does not see its list %d", id)
		}
	}
	if n := countIDs(g, mine); n != 0 {
		t.Errorf("globex's key lists %d of acme's lists", n)
	}
}

func countIDs(es []listEntry, ids map[int64]string) int {
	n := 0
	for _, e := range es {
		if _, ok := ids[e.ListID]; ok {
			n++
		}
	}
	return n
}

func pos(es []listEntry, id int64) int {
	return slices.IndexFunc(es, func(e listEntry) bool { return e.ListID == id })
}

// TestListIndexRefusals: bad paging parameters and keys are refused as the
// other list calls refuse them.
func TestListIndexRefusals(t *testing.T) {
	for _, c := range []struct {
		name, query, key string
		want             int
	}{
		{"no key", "", "", http.StatusUnauthorized},
		{"unknown key", "", "no-such-key-000000000000", http.StatusUnauthorized},
		{"limit 0", "limit=0", keyAcme, http.StatusBadRequest},
		{"limit too large", "limit=501", keyAcme, http.StatusBadRequest},
		{"limit not a number", "limit=ten", keyAcme, http.StatusBadRequest},
		{"cursor not ours", "cursor=abc", keyAcme, http.StatusBadRequest},
		{"cursor without id", "cursor=1700000000.0", keyAcme, http.StatusBadRequest},
		{"largest limit", "limit=500", keyAcme, http.StatusOK},
		{"a key for no list service", "", keyFraud, http.StatusOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := do(t, newRequest(t, http.MethodGet, "/v5/lists?"+c.query, c.key, nil, ""))
			if r.code != c.want {
				t.Errorf("%d %s, want %d", r.code, r.body, c.want)
			}
			if cc := r.header.Get("Cache-Control"); c.key != "" && cc != "no-store" {
				t.Errorf("Cache-Control %q, want no-store", cc)
			}
		})
	}
}

// TestKeyServices: GET /v5/key names what the key is enabled for.
func TestKeyServices(t *testing.T) {
	for _, c := range []struct {
		key                          string
		services, lists, purchasable []string
	}{
		{keyAcme, []string{"email_validation"}, []string{"email_validation"}, []string{}},
		{keyMulti, []string{"email_validation", "email_intelligence"}, []string{"email_validation", "email_intelligence"}, []string{"email_intelligence"}},
		{keyFraud, []string{"fraud"}, []string{}, []string{}},
	} {
		r := do(t, newRequest(t, http.MethodGet, "/v5/key", c.key, nil, ""))
		var got struct {
			Services     []string `json:"services"`
			ListServices []string `json:"list_services"`
			Purchasable  []string `json:"purchasable"`
		}
		if r.code != http.StatusOK || json.Unmarshal(r.body, &got) != nil {
			t.Fatalf("%s: %d %s", c.key, r.code, r.body)
		}
		if !slices.Equal(got.Services, c.services) || !slices.Equal(got.ListServices, c.lists) || !slices.Equal(got.Purchasable, c.purchasable) {
			t.Errorf("%s: %+v, want services %v lists %v purchasable %v", c.key, got, c.services, c.lists, c.purchasable)
		}
	}
	if r := do(t, newRequest(t, http.MethodGet, "/v5/key", "no-such-key-000000000000", nil, "")); r.code != http.StatusUnauthorized {
		t.Errorf("unknown key: %d %s", r.code, r.body)
	}
}
