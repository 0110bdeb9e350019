package verify_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/emaildata/emaildata/internal/engine/emaillists"
	"github.com/emaildata/emaildata/internal/engine/mxdns"
	"github.com/emaildata/emaildata/internal/engine/typo"
	"github.com/emaildata/emaildata/internal/engine/verify"
	"github.com/emaildata/emaildata/internal/kits/mailworld"
	"github.com/emaildata/emaildata/internal/kits/memnet"
	"github.com/emaildata/emaildata/internal/kits/simtime"
)

// dnsWorld starts a mail world with one domain of each DNS shape, on an
// in-memory network, in the test's synctest bubble.
func dnsWorld(t *testing.T) (*mailworld.World, *memnet.Network) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	n := memnet.New()
	w, err := mailworld.Start(ctx, []mailworld.Domain{
		{Name: "good.test", DefaultBehaviour: mailworld.Exists},
		{Name: "implicit.test", NoMX: true},
		{Name: "nullmx.test", NullMX: true},
		{Name: "gone.test", NXDomain: true},
		{Name: "noip.test", NoAddress: true},
		{Name: "gmial.com", DefaultBehaviour: mailworld.Exists}, // a squatted typo domain
	}, mailworld.Options{Network: n})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return w, n
}

func newEngine(w *mailworld.World, n *memnet.Network) *verify.Engine {
	lists := emaillists.Default().With(emaillists.Extra{
		SuppressedAddresses: []string{"unsubscribed@good.test"},
		SpamTrapDomains:     []string{"trap.test"},
	})
	return &verify.Engine{
		Lists:     func() *emaillists.Lists { return lists },
		Typos:     typo.Default(),
		DNS:       mxdns.New(mxdns.Config{Server: w.DNSAddr(), Timeout: time.Second, Dial: n.DialContext}),
		ExtraTLDs: map[string]bool{"test": true},
	}
}

// TestEngineWithoutSMTP covers the offline stages and the DNS stage.
func TestEngineWithoutSMTP(t *testing.T) {
	cases := []struct {
		addr        string
		code        verify.Code
		domainType  string
		role        bool
		corrections bool
	}{
		{"john@good.test", verify.CodeValidDomain, "biz", false, false},
		{"sales@good.test", verify.CodeValidDomain, "biz", true, false},
		{"x@implicit.test", verify.CodeValidDomain, "biz", false, false},
		{"x@nullmx.test", verify.CodeDomainNoMail, "biz", false, false},
		{"x@gone.test", verify.CodeDomainNotFound, "biz", false, false},
		{"x@noip.test", verify.CodeDomainNoIP, "biz", false, false},
		{"abuse@good.test", verify.CodeUsernameNotAccepted, "biz", true, false},
		{"unsubscribed@good.test", verify.CodeSuppressed, "biz", false, false},
		{"anyone@trap.test", verify.CodeSpamTrap, "biz", false, false},
		{"someone@mailinator.com", verify.CodeSpamTrap, "disposable", false, false},
		{"john@gmial.com", verify.CodeDomainNotAccepted, "", false, true},
		{"john@@good.test", verify.CodeMultipleAt, "", false, true},
		{"john@gmail,com", verify.CodeDomainSyntax, "", false, true},
		{"no-at-sign", verify.CodeNoAt, "", false, false},
	}
	for _, tc := range cases {
		t.Run(tc.addr, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEngine(dnsWorld(t))
				r := e.Verify(context.Background(), tc.addr, verify.Options{})
				if r.Code != tc.code {
					t.Fatalf("code %d (%s), want %d; result %+v", r.Code, r.Code, tc.code, r)
				}
				if r.Address != tc.addr {
					t.Errorf("address %q not echoed", r.Address)
				}
				if tc.domainType != "" && r.DomainType != tc.domainType {
					t.Errorf("domain_type %q, want %q", r.DomainType, tc.domainType)
				}
				if r.RoleAccount != tc.role {
					t.Errorf("role_account %v, want %v", r.RoleAccount, tc.role)
				}
				if (len(r.Corrections) > 0) != tc.corrections {
					t.Errorf("corrections %v, want some: %v", r.Corrections, tc.corrections)
				}
				if len(r.Corrections) > 0 && r.Status != verify.StatusInvalid {
					t.Errorf("a result with corrections must be invalid, got %s", r.Status)
				}
			})
		})
	}
}

// TestEngineBatchMatchesSingle: batch mode gives the single-address answers.
func TestEngineBatchMatchesSingle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, n := dnsWorld(t)
		e := newEngine(w, n)
		addrs := []string{"a@good.test", "b@good.test", "x@gone.test", "bad", "c@nullmx.test", "d@implicit.test", "e@good.test"}
		got := make([]verify.Result, len(addrs))
		if err := e.VerifyBatch(context.Background(), addrs, got, verify.Options{}); err != nil {
			t.Fatal(err)
		}
		for i, a := range addrs {
			want := e.Verify(context.Background(), a, verify.Options{})
			if got[i].Code != want.Code || got[i].Address != a {
				t.Errorf("%s: batch %d, single %d", a, got[i].Code, want.Code)
			}
		}
		if q := w.DNSQueries("good.test", "MX"); q != 1 {
			t.Errorf("good.test MX queried %d times; the cache should make it 1", q)
		}
	})
}

// TestEngineTimeout: a DNS server that never answers within the caller's
// deadline gives code 5, at the deadline.
func TestEngineTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		addr, dial := blackhole(t)
		e := &verify.Engine{DNS: mxdns.New(mxdns.Config{Server: addr, Timeout: 2 * time.Second, Dial: dial})}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		r := e.Verify(ctx, "john@example.com", verify.Options{})
		if r.Code != verify.CodeTimeout || r.Status != verify.StatusUnknown || time.Since(start) != 100*time.Millisecond {
			t.Fatalf("got %d %s after %v, want 5 unknown at the 100ms deadline", r.Code, r.Status, time.Since(start))
		}
		// The lookup goes on in the background for later callers (its own
		// attempts' timeouts): let it end with the bubble.
		simtime.Advance(time.Minute)
	})
}
