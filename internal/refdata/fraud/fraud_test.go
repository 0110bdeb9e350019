package fraud

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/emaildata/emaildata/internal/engine/verify"
)

func TestAssessJSONShape(t *testing.T) {
	geo := buildMMDB(t, []geoNet{{CIDR: "73.0.0.0/8", Country: "US", Lat: 39.7, Lon: -104.9, Org: "Comcast Cable"}})
	people := fakePeople{"ann.lee@gmail.com": {"Ann", "Lee", "123 Main St", "Denver", "80202"}}
	s := New(testConfig(t, nil), Deps{History: NewMemoryHistory(0, 0), GeoIP: geo, People: people, Now: fixedClock(t0)})
	in := Input{
		Email: "ann.lee@gmail.com", ReferenceID: "order-17", First: "Ann", Last: "Lee", Street: "123 Main Street",
		City: "Denver", State: "CO", Zip: "80202", Country: "US", Phone: "+1 201 555 0123", IP: "73.1.2.3",
		UserAgent: "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0 Safari/537.36",
	}
	a := s.Assess(context.Background(), testTenant, in, okResult(in.Email))
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	get := func(path string) any {
		var cur any = m
		for _, p := range strings.Split(path, ".") {
			obj, ok := cur.(map[string]any)
			if !ok {
				return nil
			}
			cur = obj[p]
		}
		return cur
	}
	for _, path := range []string{
		"assessment", "reference_id", "reasons",
		"risk.score", "risk.tumbling_risk", "risk.query_id", "risk.domain_risk_score",
		"risk.ip.routing_type", "risk.ip.organization", "risk.ip.hosting_facility", "risk.ip.latitude", "risk.ip.longitude",
		"risk.postal.first_name_match", "risk.postal.last_name_match", "risk.postal.street_match", "risk.postal.city_match",
		"risk.postal.zip_match", "risk.postal.deliverability", "risk.postal.address_type",
		"risk.phone.line_type", "risk.phone.status",
		"eam.date_first_seen", "eam.longevity", "eam.velocity", "eam.popularity",
		"dam.date_first_seen", "dam.longevity", "dam.velocity", "dam.popularity",
		"email_validation.status", "email_validation.status_code", "email_validation.address",
	} {
		if get(path) == nil {
			t.Errorf("%s missing in %s", path, b)
		}
	}
	if get("assessment") != UnlikelyFraud || get("reference_id") != "order-17" || get("email_validation.status") != "safetosend" {
		t.Errorf("body %s", b)
	}
	if get("risk.postal.street_match") != Match {
		t.Errorf("street_match %v", get("risk.postal.street_match"))
	}
	// The reasons add up to the score (before clamping).
	sum := s.Config().BaseScore
	for _, r := range a.Reasons {
		if r.Points == 0 || r.Description == "" || reasonDescriptions[r.Code] != r.Description {
			t.Errorf("bad reason %+v", r)
		}
		sum += r.Points
	}
	if max(0, min(100, sum)) != a.Risk.Score {
		t.Errorf("score %d, reasons add to %d", a.Risk.Score, sum)
	}
	// No submitted value appears in the reasons.
	rb, _ := json.Marshal(a.Reasons)
	for _, v := range []string{"ann", "Lee", "73.1.2.3", "555", "Denver", "80202"} {
		if strings.Contains(string(rb), v) {
			t.Errorf("reasons contain input %q: %s", v, rb)
		}
	}
}

func TestAssessScoreAndThreshold(t *testing.T) {
	ctx := context.Background()
	s := New(testConfig(t, nil), Deps{})
	good := Input{Email: "ann.lee@acme.com", First: "Ann", Last: "Lee", UserAgent: "Mozilla/5.0 (Macintosh) Safari/605.1"}
	ga := s.Assess(ctx, testTenant, good, evResult(good.Email, verify.CodeDeliverable, "biz", false))
	if ga.Assessment != UnlikelyFraud || ga.Risk.Score != 0 {
		t.Errorf("good: %s %d %v", ga.Assessment, ga.Risk.Score, codes(ga))
	}
	bad := Input{Email: "xkqzvbtwrp@mailinator.com", IP: "185.220.101.3", Phone: "12", UserAgent: "HeadlessChrome puppeteer", Country: "XX"}
	ba := s.Assess(ctx, testTenant, bad, evResult(bad.Email, verify.CodeSpamTrap, "disposable", false))
	if ba.Assessment != LikelyFraud || ba.Risk.Score != 100 {
		t.Errorf("bad: %s %d %v", ba.Assessment, ba.Risk.Score, codes(ba))
	}
	if ba.Risk.DomainRiskScore != 10 {
		t.Errorf("domain_risk_score %d", ba.Risk.DomainRiskScore)
	}

	// The threshold is configuration: at the same score the verdict flips.
	mid := Input{Email: "ann.lee@gmail.com", IP: "104.131.9.9"}
	ev := okResult(mid.Email)
	score := s.Assess(ctx, testTenant, mid, ev).Risk.Score
	for _, tc := range []struct {
		threshold int
		want      string
	}{{score, LikelyFraud}, {score + 1, UnlikelyFraud}} {
		c := s.Config()
		c.Threshold = tc.threshold
		s2 := New(c, Deps{})
		if got := s2.Assess(ctx, testTenant, mid, ev).Assessment; got != tc.want {
			t.Errorf("threshold %d score %d: %s", tc.threshold, score, got)
		}
	}
}

func TestAssessNeverFails(t *testing.T) {
	s := New(DefaultConfig(), Deps{History: NewMemoryHistory(0, 0), People: fakePeople{}})
	inputs := []Input{
		{},
		{Email: "@"},
		{Email: "not an email", IP: "::::", Phone: "+", Zip: "\x00", Country: "??", State: "✓", UserAgent: strings.Repeat("x", 10000)},
		{Email: "a@b", First: "\u202e", Last: strings.Repeat("é", 500), Street: "#", City: "-"},
		{Email: "ann@gmail.com", Phone: "+999 123", IP: "1.2.3.4/24", Country: "usa"},
	}
	for _, in := range inputs {
		ev := verify.CheckSyntax(in.Email)
		a := s.Assess(context.Background(), testTenant, in, ev)
		if a.Risk.Score < 0 || a.Risk.Score > 100 || a.Risk.QueryID == "" || (a.Assessment != LikelyFraud && a.Assessment != UnlikelyFraud) {
			t.Errorf("%+v: %+v", in, a)
		}
		if a.Risk.TumblingRisk < 0 || a.Risk.TumblingRisk > 3 || a.Risk.DomainRiskScore < 0 || a.Risk.DomainRiskScore > 10 {
			t.Errorf("ranges: %+v", a.Risk)
		}
	}
}

func TestQueryIDUnique(t *testing.T) {
	s := New(DefaultConfig(), Deps{})
	seen := map[string]bool{}
	for range 1000 {
		id := s.Assess(context.Background(), testTenant, Input{Email: "a@b.com"}, okResult("a@b.com")).Risk.QueryID
		if len(id) != 32 || seen[id] {
			t.Fatalf("query id %q repeated or malformed", id)
		}
		seen[id] = true
	}
}

func TestEmailValidationEchoesCorrection(t *testing.T) {
	s := New(DefaultConfig(), Deps{})
	ev := evResult("ann@gmial.com", verify.CodeDomainNotAccepted, "", false, "ann@gmail.com")
	a := s.Assess(context.Background(), testTenant, Input{Email: "ann@gmial.com"}, ev)
	if len(a.EmailValidation.EmailCorrections) != 1 || a.EmailValidation.Status != verify.StatusInvalid {
		t.Errorf("email_validation %+v", a.EmailValidation)
	}
	if a.Risk.DomainRiskScore != DefaultConfig().DomainRisk.Typo {
		t.Errorf("domain_risk_score %d", a.Risk.DomainRiskScore)
	}
}

// TestConcurrentAssessAndReload runs queries while the configuration is
// swapped (go test -race).
func TestConcurrentAssessAndReload(t *testing.T) {
	s := New(testConfig(t, nil), Deps{History: NewMemoryHistory(1000, 16)})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 200 {
			c := s.Config()
			c.Threshold = 40 + i%20
			c.Weights[ReasonIPTor] = i % 60
			s.SetConfig(c)
		}
	}()
	for i := range 500 {
		email := fmt.Sprintf("user%d@gmail.com", i%50)
		a := s.Assess(context.Background(), testTenant, Input{Email: email, IP: "185.220.101.1", Phone: "+12015550123"}, okResult(email))
		if a.Risk.Score < 0 || a.Risk.Score > 100 {
			t.Fatal(a.Risk.Score)
		}
	}
	<-done
}
