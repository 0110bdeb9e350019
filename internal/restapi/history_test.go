package restapi_test

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"maps"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/engine/emaillists"
	"github.com/emaildata/emaildata/internal/engine/evhistory"
	"github.com/emaildata/emaildata/internal/engine/mxdns"
	"github.com/emaildata/emaildata/internal/engine/typo"
	"github.com/emaildata/emaildata/internal/engine/verify"
	"github.com/emaildata/emaildata/internal/kits/mailworld"
	"github.com/emaildata/emaildata/internal/kits/testkit/redistest"
	"github.com/emaildata/emaildata/internal/restapi"
	"github.com/emaildata/emaildata/internal/wiring"
)

// The verification history of issue 30 (items 7 and 8), through the real
// API with two tenants (keyAcme: tenant acme, keyGlobex: tenant globex).
// The suite verifies the domains below with SMTP against its mail world
// and a history, in the API (GET /v5/ev) and in the manager (lists) alike,
// as one installation's processes share one history; every other domain
// is verified as before (histRoutes).

// Domains with a history, one per scope, and one whose history is kept
// under another key (TestHistoryKeyMismatchReported).
const (
	tenantDomain   = "tenant.test"
	sharedDomain   = "shared.test"
	mismatchDomain = "mismatch.test"
)

var suiteHistoryKey = []byte("restapi-suite-history-key-0001")

// histURL is the base URL of the API whose verifier routes the history
// domains to their engines (runSuite starts it).
var histURL string

// histLocals are the mailboxes of the history domains (others: 550).
var histLocals = []string{"ivan", "judy", "kim", "lea", "mia", "noor", "olga", "pia", "quinn", "rosa"}

func histWorldDomains() []mailworld.Domain {
	var out []mailworld.Domain
	for _, d := range []string{tenantDomain, sharedDomain, mismatchDomain} {
		boxes := map[string]mailworld.Behaviour{}
		for _, l := range histLocals {
			boxes[l] = mailworld.Exists
		}
		out = append(out, mailworld.Domain{Name: d, Mailboxes: boxes})
	}
	return out
}

// histClock is the histories' and their engines' clock: the wall clock
// unless a test pins it.
var histClock pinnedClock

type pinnedClock struct {
	mu  sync.Mutex
	at  time.Time
	set bool
}

func (c *pinnedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.set {
		return c.at
	}
	return time.Now()
}

// pin sets the clock until the test ends.
func (c *pinnedClock) pin(t *testing.T, at time.Time) {
	c.mu.Lock()
	c.at, c.set = at, true
	c.mu.Unlock()
	t.Cleanup(func() {
		c.mu.Lock()
		c.set = false
		c.mu.Unlock()
	})
}

// histRoutes maps a history domain to its engine.
var histRoutes sync.Map

// startHistories opens a history per scope in dir and routes its domain.
func startHistories(ctx context.Context, dir string) error {
	for scope, domain := range map[evhistory.Scope]string{evhistory.ScopeTenant: tenantDomain, evhistory.ScopeShared: sharedDomain} {
		h, err := evhistory.Open(ctx, "bolt://"+filepath.Join(dir, string(scope)+".db"), evhistory.Options{
			TTLs: evhistory.DefaultTTLs(), Scope: scope, Secret: suiteHistoryKey, Now: histClock.Now})
		if err != nil {
			return err
		}
		context.AfterFunc(ctx, func() { _ = h.Close() })
		e, err := histEngine(h)
		if err != nil {
			return err
		}
		histRoutes.Store(domain, e)
	}
	return nil
}

// histEngine verifies with SMTP against the mail world and history h.
func histEngine(h *evhistory.History) (*verify.Engine, error) {
	vc := wiring.DefaultAPIVerifyConfig()
	vc.Probe.Port, vc.SMTPAllowCIDRs = world.SMTPPort(), "127.0.0.0/8"
	prober, err := wiring.NewProber(vc)
	if err != nil {
		return nil, err
	}
	return &verify.Engine{
		Lists: emaillists.Default, Typos: typo.Default(),
		DNS:  mxdns.New(mxdns.Config{Server: world.DNSAddr(), Timeout: time.Second}),
		SMTP: prober, ExtraTLDs: map[string]bool{"test": true},
		History: h, Reporters: []verify.Reporter{h}, Now: histClock.Now,
	}, nil
}

// routeOf is the engine of an address's domain, or base.
func routeOf(address string, base *verify.Engine) *verify.Engine {
	_, domain, _ := strings.Cut(strings.ToLower(strings.TrimSpace(address)), "@")
	if e, ok := histRoutes.Load(domain); ok {
		return e.(*verify.Engine)
	}
	return base
}

// routedVerifier is the API's verifier: base but for the history domains.
type routedVerifier struct{ base *verify.Engine }

func (v routedVerifier) Verify(ctx context.Context, address string, o verify.Options) verify.Result {
	return routeOf(address, v.base).Verify(ctx, address, o)
}

// routedBatch is the lists' checker: base but for the history domains.
func routedBatch(base *verify.Engine) func(context.Context, []string, []verify.Result, verify.Options) error {
	return func(ctx context.Context, addrs []string, results []verify.Result, o verify.Options) error {
		if err := gate.hold(ctx, addrs); err != nil {
			return err
		}
		groups := map[*verify.Engine][]int{}
		for i, a := range addrs {
			e := routeOf(a, base)
			groups[e] = append(groups[e], i)
		}
		for e, idx := range groups {
			sub, res := make([]string, len(idx)), make([]verify.Result, len(idx))
			for j, i := range idx {
				sub[j] = addrs[i]
			}
			if err := e.VerifyBatch(ctx, sub, res, o); err != nil {
				return err
			}
			for j, i := range idx {
				results[i] = res[j]
			}
		}
		return nil
	}
}

// histCounters sums the history engines' counters, for shard summaries.
func histCounters() map[string]float64 {
	out := map[string]float64{}
	histRoutes.Range(func(_, e any) bool {
		for k, v := range wiring.EngineCounters(e.(*verify.Engine)) {
			out[k] += v
		}
		return true
	})
	return out
}

// rcpts counts the RCPT commands the domain's mail hosts received: each
// probe of a mailbox sends one, an answer from the history none.
func rcpts(domain string) int {
	st := world.Stats()
	n := 0
	for _, h := range world.MXHostNames(domain) {
		n += st.Hosts[h].RCPT
	}
	return n
}

// evCheck calls GET /v5/ev of the API at base for key and returns the
// status code in the answer and the RCPTs the call made to box's domain.
func evCheck(t *testing.T, base, key, box string, kv ...string) (code int, probes int) {
	t.Helper()
	_, domain, _ := strings.Cut(box, "@")
	before := rcpts(domain)
	req, err := http.NewRequest(http.MethodGet, base+"/v5/ev?"+q(append([]string{"api_key", key, "email", box}, kv...)...).Encode(), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("accept", "application/json")
	r := do(t, req)
	if r.code != http.StatusOK {
		t.Fatalf("GET /v5/ev %s: %d %s", box, r.code, r.body)
	}
	sts := r.json(t)["safe_to_send"].(map[string]any)
	return int(sts["status_code"].(float64)), rcpts(domain) - before
}

// listFromHistory submits boxes as a list for key and returns each row's
// ev_from_history, by address.
func listFromHistory(t *testing.T, key string, boxes ...string) map[string]string {
	t.Helper()
	id := listID(t, submit(t, key, q("name", "boxes.txt"), "boxes.txt", []byte(strings.Join(boxes, "\n")+"\n")))
	waitStatus(t, key, id, "Results")
	res := do(t, newRequest(t, http.MethodGet, fmt.Sprintf("/v5/list/%d/results", id), key, nil, ""))
	if res.code != http.StatusOK {
		t.Fatalf("results: %d %s", res.code, res.body)
	}
	cr := csv.NewReader(strings.NewReader(string(res.body)))
	cr.Comma = '\t' // a .txt list's delimiter
	rows, err := cr.ReadAll()
	if err != nil || len(rows) != len(boxes)+1 || rows[0][len(rows[0])-1] != "ev_from_history" {
		t.Fatalf("results %q: %v", res.body, err)
	}
	out := map[string]string{}
	for _, r := range rows[1:] {
		if r[2] != "50" { // ev_status_code: the mail world has every box
			t.Errorf("%s: status code %s, want 50", r[0], r[2])
		}
		out[r[0]] = r[len(r)-1]
	}
	return out
}

// In the tenant scope (the default), acme's GET /v5/ev of an address does
// not make globex's answer come from the history: globex's call probes
// the mail server (issue 30: "A's /v5/ev for ivan makes B's list show
// ev_from_history=true"; and a history hit answers in a millisecond, a
// probe in hundreds). acme's own second call is answered from its history.
func TestHistoryTenantScopeEV(t *testing.T) {
	box := "ivan@" + tenantDomain
	if code, probes := evCheck(t, histURL, keyAcme, box); code != 50 || probes == 0 {
		t.Fatalf("acme's first check: code %d, %d RCPTs; want 50 from a probe", code, probes)
	}
	if code, probes := evCheck(t, histURL, keyAcme, box); code != 50 || probes != 0 {
		t.Errorf("acme's second check: code %d, %d RCPTs; want its own verdict from the history", code, probes)
	}
	if code, probes := evCheck(t, histURL, keyGlobex, box); code != 50 || probes == 0 {
		t.Errorf("globex's check: code %d, %d RCPTs; want a probe, not acme's verdict", code, probes)
	}
	if code, probes := evCheck(t, histURL, keyGlobex, box); code != 50 || probes != 0 {
		t.Errorf("globex's second check: code %d, %d RCPTs; want its own verdict from the history", code, probes)
	}
}

// In the tenant scope a list shows ev_from_history=true only for its
// tenant's own earlier checks: after acme's GET /v5/ev of kim, globex's
// list of kim and lea has both false, acme's the same list kim true and
// lea false (globex's probe of lea is globex's), globex's next list both
// true.
func TestHistoryTenantScopeLists(t *testing.T) {
	kim, lea := "kim@"+tenantDomain, "lea@"+tenantDomain
	if code, _ := evCheck(t, histURL, keyAcme, kim); code != 50 {
		t.Fatalf("acme's check of kim: %d", code)
	}
	for _, step := range []struct {
		who, key string
		want     map[string]string
	}{
		{"globex", keyGlobex, map[string]string{kim: "false", lea: "false"}},
		{"acme", keyAcme, map[string]string{kim: "true", lea: "false"}},
		{"globex again", keyGlobex, map[string]string{kim: "true", lea: "true"}},
	} {
		if got := listFromHistory(t, step.key, kim, lea); !maps.Equal(got, step.want) {
			t.Errorf("%s's list: ev_from_history %v, want %v", step.who, got, step.want)
		}
	}
}

// In the shared scope (opt-in) globex can get acme's check, as documented,
// but dated to the hour: acme checked judy at hh:05:00 and ivan at
// hh:37:12; thirty seconds after the second, globex's GET /v5/ev with
// max_age stepping finds both answered from the history at max_age 2262
// (37 min 42 s: since the hour began) and neither at 2261, so it learns
// the hour of either check and nothing closer. A list of globex shows
// ev_from_history=true for an address acme checked ("from history" is all
// it says).
func TestHistorySharedScope(t *testing.T) {
	hour := time.Now().Truncate(time.Hour)
	judy, ivan, mia, noor := "judy@"+sharedDomain, "ivan@"+sharedDomain, "mia@"+sharedDomain, "noor@"+sharedDomain
	check := func(box string) {
		t.Helper()
		if code, probes := evCheck(t, histURL, keyAcme, box); code != 50 || probes == 0 {
			t.Fatalf("acme's check of %s: code %d, %d RCPTs; want a probe", box, code, probes)
		}
	}
	histClock.pin(t, hour.Add(5*time.Minute))
	check(judy)
	histClock.pin(t, hour.Add(37*time.Minute+12*time.Second))
	check(ivan)
	check(mia)
	histClock.pin(t, hour.Add(37*time.Minute+42*time.Second))
	for _, box := range []string{judy, ivan} {
		if code, probes := evCheck(t, histURL, keyGlobex, box, "max_age", "2262"); code != 50 || probes != 0 {
			t.Errorf("%s, max_age 2262: code %d, %d RCPTs; want acme's verdict from the shared history", box, code, probes)
		}
		if code, probes := evCheck(t, histURL, keyGlobex, box, "max_age", "2261"); code != 50 || probes == 0 {
			t.Errorf("%s, max_age 2261: code %d, %d RCPTs; want a probe: dated to the hour, the check is older than that", box, code, probes)
		}
	}
	if got := listFromHistory(t, keyGlobex, mia, noor); got[mia] != "true" || got[noor] != "false" {
		t.Errorf("globex's list in the shared scope: ev_from_history %v, want mia (acme's check) true, noor false", got)
	}
}

// Issue 30, item 8, through the API and a list, against the real Redis: a
// process whose history key differs from the one the store is kept under
// reports it on GET /readyz (still ready: it probes), probes every
// address, and a list whose shards met it gets a Warning event.
func TestHistoryKeyMismatchReported(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	url := redistest.URL(t, "restapihist") // fails under CI=true without Redis
	owner, err := evhistory.Open(ctx, url, evhistory.Options{TTLs: evhistory.DefaultTTLs(), Secret: []byte("the-installation-key-0001")})
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	h, err := evhistory.Open(ctx, url, evhistory.Options{TTLs: evhistory.DefaultTTLs(), Secret: suiteHistoryKey, Now: histClock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	e, err := histEngine(h)
	if err != nil {
		t.Fatal(err)
	}
	histRoutes.Store(mismatchDomain, e)
	defer histRoutes.Delete(mismatchDomain)

	addr, err := startAPI(ctx, restapi.Config{Verifier: routedVerifier{base: baseEngine()}, EVSMTP: true, HistoryHealth: wiring.HistoryHealth(e)})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "verification history not in use") ||
		!strings.Contains(string(body), owner.Fingerprint()) || !strings.Contains(string(body), h.Fingerprint()) {
		t.Errorf("/readyz: %d %q, want ready, saying the history is kept under key %s, not %s", resp.StatusCode, body, owner.Fingerprint(), h.Fingerprint())
	}
	box := "olga@" + mismatchDomain
	for range 2 {
		if code, probes := evCheck(t, "http://"+addr, keyAcme, box); code != 50 || probes == 0 {
			t.Errorf("GET /v5/ev with the key mismatched: code %d, %d RCPTs; want a probe each time", code, probes)
		}
	}
	id := listID(t, submit(t, keyAcme, q("name", "m.txt"), "m.txt", []byte(box+"\n")))
	waitStatus(t, keyAcme, id, "Results")
	var lists listsv1.EmailListList
	if err := k8s.List(ctx, &lists, client.InNamespace(nsSystem), client.MatchingLabels{listsv1.ListIDLabel: strconv.FormatInt(id, 10)}); err != nil || len(lists.Items) != 1 {
		t.Fatalf("list %d: %v (%d found)", id, err, len(lists.Items))
	}
	name := lists.Items[0].Name
	deadline := time.Now().Add(10 * time.Second)
	for {
		var evs eventsv1.EventList
		if err := k8s.List(ctx, &evs, client.InNamespace(nsSystem)); err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs.Items {
			if ev.Regarding.Name == name && ev.Type == corev1.EventTypeWarning && ev.Reason == "HistoryKeyMismatch" {
				if !strings.Contains(ev.Note, "HISTORY_KEY") {
					t.Errorf("event note %q does not say what to do", ev.Note)
				}
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no HistoryKeyMismatch Warning event on list %s", name)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
