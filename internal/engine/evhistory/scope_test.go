package evhistory

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/emaildata/emaildata/internal/engine/verify"
)

const globex = "api/globex"

// In the tenant scope a tenant's lookups find only its own verdicts, on
// every backend: another tenant's check of the same address is invisible,
// and a call without a tenant neither reads nor writes.
func TestTenantScopeIsolates(t *testing.T) {
	for name, mk := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			h, err := Open(ctx, mk(t).url, Options{TTLs: DefaultTTLs(), Secret: testSecret})
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			if h.Scope() != ScopeTenant {
				t.Fatalf("default scope %q", h.Scope())
			}
			rec := func(tenant, box string) {
				t.Helper()
				if err := h.Record(ctx, tenant, []verify.NewVerdict{{Mailbox: box, Code: verify.CodeDeliverable}}); err != nil {
					t.Fatal(err)
				}
			}
			look := func(tenant string, boxes ...string) []verify.Code {
				t.Helper()
				got, err := h.Lookup(ctx, tenant, boxes, nil)
				if err != nil {
					t.Fatal(err)
				}
				out := make([]verify.Code, len(got))
				for i, g := range got {
					out[i] = g.Code
				}
				return out
			}
			rec(acme, "ivan@example.test")
			if got := look(acme, "ivan@example.test"); got[0] != verify.CodeDeliverable {
				t.Errorf("acme's own verdict: %v", got)
			}
			if got := look(globex, "ivan@example.test"); got[0] != 0 {
				t.Errorf("globex sees acme's verdict: %v", got)
			}
			rec(globex, "judy@example.test")
			if got := look(acme, "ivan@example.test", "judy@example.test"); got[0] != verify.CodeDeliverable || got[1] != 0 {
				t.Errorf("acme: %v, want its own ivan and no judy", got)
			}
			// No tenant: nothing read, nothing kept.
			rec("", "kim@example.test")
			if got := look("", "ivan@example.test", "kim@example.test"); got[0] != 0 || got[1] != 0 {
				t.Errorf("a call without a tenant: %v", got)
			}
			if st := h.Stats(); st.Recorded != 2 || st.Errors != 0 {
				t.Errorf("stats %+v, want 2 recorded (the tenant-less one not), no errors", st)
			}
		})
	}
}

// The max_age stepping attack of issue 30: a tenant that asks for ever
// fresher verdicts finds when an address was checked. In the tenant scope
// it can only date its own checks (to the second: they are its own). In
// the shared scope another tenant's check is dated to the hour: two
// checks made at 10:05:00 and 10:37:12 of one hour answer every max_age
// alike, the check time handed back is 10:00:00, and the TTL ends on the
// hour too, so watching an entry expire tells no more.
func TestMaxAgeSteppingDatesToTheHour(t *testing.T) {
	ctx := context.Background()
	// The hour anchored at real time (the stores expire by their own clocks).
	hour := time.Now().Truncate(time.Hour)
	early, late := hour.Add(5*time.Minute), hour.Add(37*time.Minute+12*time.Second)
	now := late.Add(30 * time.Second)
	ttls := DefaultTTLs()
	for _, scope := range []Scope{ScopeTenant, ScopeShared} {
		t.Run(string(scope), func(t *testing.T) {
			clk := &testClock{t: now}
			h, err := Open(ctx, boltBackend(t).url, Options{TTLs: ttls, Secret: testSecret, Scope: scope, Now: clk.Now})
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			if err := h.Record(ctx, acme, []verify.NewVerdict{
				{Mailbox: "ivan@example.test", Code: verify.CodeCatchAll, CheckedAt: early},
				{Mailbox: "judy@example.test", Code: verify.CodeCatchAll, CheckedAt: late},
			}); err != nil {
				t.Fatal(err)
			}
			// The smallest max_age (whole seconds) at which each address
			// is a hit for globex, and for acme.
			boundary := func(tenant, box string) time.Duration {
				t.Helper()
				for s := time.Duration(0); s <= 2*time.Hour; s += time.Second {
					got, err := h.Lookup(ctx, tenant, []string{box}, &s)
					if err != nil {
						t.Fatal(err)
					}
					if got[0].Code != 0 {
						return s
					}
				}
				return -1
			}
			ivanB, judyB := boundary(globex, "ivan@example.test"), boundary(globex, "judy@example.test")
			switch scope {
			case ScopeTenant:
				if ivanB != -1 || judyB != -1 {
					t.Errorf("globex hits acme's checks at max_age %v and %v", ivanB, judyB)
				}
				if got := boundary(acme, "judy@example.test"); got != 30*time.Second {
					t.Errorf("acme dates its own check: boundary %v, want 30s", got)
				}
			case ScopeShared:
				want := now.Sub(hour) // 37m42s: from the hour's start, for both
				if ivanB != want || judyB != want {
					t.Errorf("globex's boundaries %v (ivan, 10:05:00) and %v (judy, 10:37:12), want both %v", ivanB, judyB, want)
				}
				got, _ := h.Lookup(ctx, globex, []string{"judy@example.test"}, nil)
				if !got[0].CheckedAt.Equal(hour) {
					t.Errorf("judy's verdict dated %v, want the hour %v", got[0].CheckedAt, hour)
				}
				// The TTL ends on the hour: a second past hour+TTL both are
				// gone, though judy was checked 37 minutes later.
				clk.t = hour.Add(ttls.CatchAll + time.Second)
				if got, _ := h.Lookup(ctx, globex, []string{"ivan@example.test", "judy@example.test"}, nil); got[0].Code != 0 || got[1].Code != 0 {
					t.Errorf("past the hour's TTL: %v, want both expired", got)
				}
			}
		})
	}
}

// Through the engine, as a list and GET /v5/ev use it: in the tenant
// scope, globex's answer after acme checked ivan is a probe, not history;
// in the shared scope it is history.
func TestEngineScopes(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		scope        Scope
		globexProbes int
	}{{ScopeTenant, 1}, {ScopeShared, 0}} {
		t.Run(string(tc.scope), func(t *testing.T) {
			h, err := Open(ctx, boltBackend(t).url, Options{TTLs: DefaultTTLs(), Secret: testSecret, Scope: tc.scope})
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			ck := &checker{answer: map[string]verify.Code{"ivan@example.test": verify.CodeDeliverable}}
			e := &verify.Engine{DNS: resolver{}, SMTP: ck, History: h, ExtraTLDs: map[string]bool{"test": true}}
			if r := e.Verify(ctx, "ivan@example.test", verify.Options{SMTP: true, Tenant: acme}); r.FromHistory || len(ck.take()) != 1 {
				t.Fatalf("acme's first check: %+v", r)
			}
			r := e.Verify(ctx, "ivan@example.test", verify.Options{SMTP: true, Tenant: globex})
			if got := len(ck.take()); got != tc.globexProbes || r.FromHistory != (tc.globexProbes == 0) || r.Code != verify.CodeDeliverable {
				t.Errorf("globex: %d probes, from history %v, code %d; want %d probes", got, r.FromHistory, r.Code, tc.globexProbes)
			}
		})
	}
}

// Tenants and scopes make different keys; the shared scope keeps the key
// every verdict had before scopes.
func TestKeyOfSeparates(t *testing.T) {
	keys := map[Key]string{}
	for _, c := range []struct{ scope, tenant, box string }{
		{"tenant", acme, "a@x.test"}, {"tenant", globex, "a@x.test"}, {"tenant", NamespaceTenant("acme"), "a@x.test"},
		{"tenant", "api/ac", "me\x00a@x.test"}, {"shared", acme, "a@x.test"}, {"tenant", acme, "b@x.test"},
	} {
		k := keyOf(testSecret, Scope(c.scope), c.tenant, c.box)
		if prev, dup := keys[k]; dup {
			t.Errorf("%v has the key of %s", c, prev)
		}
		keys[k] = fmt.Sprint(c)
	}
	if keyOf(testSecret, ScopeShared, acme, "A@x.test ") != keyOf(testSecret, ScopeShared, globex, "a@x.test") {
		t.Error("the shared scope's key depends on the tenant or the case")
	}
	if validTenant("api/ac\x00me") || validTenant("") || !validTenant(APITenant("0f")) {
		t.Error("validTenant")
	}
}

func TestParseScope(t *testing.T) {
	for in, want := range map[string]Scope{"": ScopeTenant, "tenant": ScopeTenant, " Shared ": ScopeShared} {
		if got, err := ParseScope(in); err != nil || got != want {
			t.Errorf("%q: %q, %v", in, got, err)
		}
	}
	if _, err := ParseScope("global"); err == nil {
		t.Error("global accepted")
	}
}
