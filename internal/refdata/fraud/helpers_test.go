package fraud

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"

	"github.com/emaildata/emaildata/internal/engine/verify"
)

// evResult builds the verify.Result a caller would pass: syntax parts from
// CheckSyntax, then the given verdict.
func evResult(email string, code verify.Code, domainType string, role bool, corrections ...string) verify.Result {
	r := verify.CheckSyntax(email)
	r.SetCode(code)
	r.DomainType = domainType
	r.RoleAccount = role
	r.Corrections = corrections
	return r
}

// okResult is a deliverable free-mail verdict.
func okResult(email string) verify.Result {
	return evResult(email, verify.CodeDeliverable, "freeisp", false)
}

func codes(a Assessment) []string {
	out := make([]string, len(a.Reasons))
	for i, r := range a.Reasons {
		out[i] = r.Code
	}
	return out
}

func hasCode(a Assessment, code string) bool { return slices.Contains(codes(a), code) }

// checkCodes asserts that want are all reported and none of notWant.
func checkCodes(t *testing.T, a Assessment, want, notWant []string) {
	t.Helper()
	for _, c := range want {
		if !hasCode(a, c) {
			t.Errorf("missing reason %s; got %v", c, codes(a))
		}
	}
	for _, c := range notWant {
		if hasCode(a, c) {
			t.Errorf("unexpected reason %s; got %v", c, codes(a))
		}
	}
}

// testConfig is the default configuration with test IP lists.
func testConfig(t testing.TB, mod func(*Config)) Config {
	t.Helper()
	c := DefaultConfig()
	c.IPLists = IPLists{
		Tor:     []string{"185.220.101.0/24"},
		VPN:     []string{"89.187.160.0/19"},
		Proxy:   []string{"45.95.147.1"},
		Hosting: []string{"104.131.0.0/16", "2604:a880::/32", "45.95.147.0/24"},
	}
	if mod != nil {
		mod(&c)
	}
	c2, err := ParseConfig(mustJSON(t, c), "")
	if err != nil {
		t.Fatal(err)
	}
	return c2
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func fixedClock(t time.Time) func() time.Time { return func() time.Time { return t } }

var t0 = time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)

// fakePeople is a PersonLookup backed by a map.
type fakePeople map[string][5]string

func (f fakePeople) Lookup(_ context.Context, email string) (first, last, street, city, zip string, ok bool) {
	p, ok := f[strings.ToLower(email)]
	return p[0], p[1], p[2], p[3], p[4], ok
}

// geoNet is one network of a test GeoIP database.
type geoNet struct {
	CIDR    string  `json:"cidr"`
	Country string  `json:"country"`
	Lat     float64 `json:"lat"`
	Lon     float64 `json:"lon"`
	Org     string  `json:"org"`
}

// buildMMDB writes a City+ASN-like database with nets into a temp dir and
// opens it.
func buildMMDB(t testing.TB, nets []geoNet) *MaxMindDB {
	t.Helper()
	tree, err := mmdbwriter.New(mmdbwriter.Options{DatabaseType: "Test-City-ASN", RecordSize: 24})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nets {
		_, ipnet, err := net.ParseCIDR(n.CIDR)
		if err != nil {
			t.Fatal(err)
		}
		rec := mmdbtype.Map{
			"country":  mmdbtype.Map{"iso_code": mmdbtype.String(n.Country)},
			"location": mmdbtype.Map{"latitude": mmdbtype.Float64(n.Lat), "longitude": mmdbtype.Float64(n.Lon)},
		}
		if n.Org != "" {
			rec["autonomous_system_organization"] = mmdbtype.String(n.Org)
		}
		if err := tree.Insert(ipnet, rec); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "geo.mmdb")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tree.WriteTo(f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := OpenMaxMind(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// testTenant asks the tests' queries.
const testTenant = "tenant-a"
