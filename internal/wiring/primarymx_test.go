package wiring

import (
	"context"
	"errors"
	"testing"

	"github.com/emaildata/emaildata/internal/engine/mxdns"
	"github.com/emaildata/emaildata/internal/lists/evlist"
	"github.com/emaildata/emaildata/internal/lists/listservice"
)

type fakeResolver map[string]mxdns.Result

func (f fakeResolver) Lookup(_ context.Context, d string) (mxdns.Result, error) {
	r, ok := f[d]
	if !ok {
		return mxdns.Result{Domain: d, Status: mxdns.Timeout}, errors.New("timeout")
	}
	return r, nil
}

// PrimaryMX is the most preferred MX host of a domain that has one, and
// nothing for one without mail hosts or whose lookup failed.
func TestPrimaryMX(t *testing.T) {
	r := fakeResolver{
		"a.test":    {Status: mxdns.OK, MX: []mxdns.MXHost{{Host: "mx1.prov.test", Pref: 10}, {Host: "mx2.prov.test", Pref: 20}}},
		"impl.test": {Status: mxdns.OK, Implicit: true, MX: []mxdns.MXHost{{Host: "impl.test"}}},
		"nx.test":   {Status: mxdns.NXDomain},
		"null.test": {Status: mxdns.NullMX},
	}
	mx := PrimaryMX(r)
	for _, tc := range []struct {
		domain, host string
		ok           bool
	}{
		{"a.test", "mx1.prov.test", true},
		{"impl.test", "impl.test", true},
		{"nx.test", "", false},
		{"null.test", "", false},
		{"down.test", "", false},
	} {
		host, ok := mx(context.Background(), tc.domain)
		if host != tc.host || ok != tc.ok {
			t.Errorf("%s: %q %v, want %q %v", tc.domain, host, ok, tc.host, tc.ok)
		}
	}
}

// The email_validation service routes by MX host only with an engine
// that resolves (an offline one leaves the pipeline on domain keys).
func TestRegistryMXSharder(t *testing.T) {
	for _, tc := range []struct {
		name string
		dns  bool
	}{{"offline", false}, {"with DNS", true}} {
		e := OfflineEngine()
		if tc.dns {
			e.DNS = fakeResolver{"a.test": {Status: mxdns.OK, MX: []mxdns.MXHost{{Host: "mx.a.test"}}}}
		}
		svc, err := RegistryFor(e, VerifyConfig{}).Lookup(evlist.Name)
		ms, isMX := svc.(listservice.MXSharder)
		if err != nil || !isMX || ms.CanResolveMX() != tc.dns {
			t.Fatalf("%s: service %T, MX sharder %v", tc.name, svc, isMX)
		}
		if host, ok := ms.PrimaryMX(context.Background(), "a.test"); tc.dns && (!ok || host != "mx.a.test") {
			t.Errorf("%s: PrimaryMX = %q %v", tc.name, host, ok)
		}
	}
}
