package fraud

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/emaildata/emaildata/internal/engine/verify"
)

// evalCase is one row of testdata/evalset.jsonl (hack/fraud-evalset).
type evalCase struct {
	ID     int       `json:"id"`
	Label  string    `json:"label"`
	Kind   string    `json:"kind"`
	At     time.Time `json:"at"`
	Input  Input     `json:"input"`
	Verify struct {
		Code        int      `json:"code"`
		DomainType  string   `json:"domain_type"`
		Role        bool     `json:"role"`
		Corrections []string `json:"corrections"`
	} `json:"verify"`
	Person *struct {
		First, Last, Street, City, Zip string
	} `json:"person"`
}

func loadEvalSet(t testing.TB) []evalCase {
	t.Helper()
	f, err := os.Open("testdata/evalset.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []evalCase
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var c evalCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("evalset line %d: %v", len(out)+1, err)
		}
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// verifyResult is the fake verification of a case: the syntax parts of the
// address and the verdict recorded in the case.
func (c evalCase) verifyResult() verify.Result {
	r := verify.CheckSyntax(c.Input.Email)
	r.SetCode(verify.Code(c.Verify.Code))
	r.DomainType = c.Verify.DomainType
	r.RoleAccount = c.Verify.Role
	r.Corrections = c.Verify.Corrections
	return r
}

// evalScorer builds the scorer of the evaluation: the given config plus the
// evalset IP lists, the evalset GeoIP networks, the reference records of the
// set, an in-memory history and a clock set per case.
func evalScorer(t testing.TB, cases []evalCase, cfg Config, now *time.Time) *Scorer {
	t.Helper()
	b, err := os.ReadFile("testdata/evalset-geo.json")
	if err != nil {
		t.Fatal(err)
	}
	var nets []geoNet
	if err := json.Unmarshal(b, &nets); err != nil {
		t.Fatal(err)
	}
	lists, err := ParseConfig([]byte(`{"ip_list_files": {"tor": ["evalset-lists/tor.txt"], "vpn": ["evalset-lists/vpn.txt"],
		"proxy": ["evalset-lists/proxy.txt"], "hosting": ["evalset-lists/hosting.txt"]}}`), "testdata")
	if err != nil {
		t.Fatal(err)
	}
	cfg.ip = lists.ip
	people := fakePeople{}
	for _, c := range cases {
		if p := c.Person; p != nil {
			people[strings.ToLower(c.Input.Email)] = [5]string{p.First, p.Last, p.Street, p.City, p.Zip}
		}
	}
	return New(cfg, Deps{
		History: NewMemoryHistory(0, 0),
		GeoIP:   buildMMDB(t, nets),
		People:  people,
		Now:     func() time.Time { return *now },
	})
}

type evalResult struct {
	tp, fp, fn, tn int
	byKind         map[string][2]int // kind -> {flagged, total}
	scores         []scored
}

type scored struct {
	score int
	fraud bool
}

func (r evalResult) precision() float64 { return float64(r.tp) / float64(max(1, r.tp+r.fp)) }
func (r evalResult) recall() float64    { return float64(r.tp) / float64(max(1, r.tp+r.fn)) }

// runEval scores the set in time order with threshold cfg.Threshold.
func runEval(t testing.TB, cases []evalCase, cfg Config) evalResult {
	var now time.Time
	s := evalScorer(t, cases, cfg, &now)
	res := evalResult{byKind: map[string][2]int{}}
	ctx := context.Background()
	for _, c := range cases {
		now = c.At
		a := s.Assess(ctx, testTenant, c.Input, c.verifyResult())
		flagged := a.Assessment == LikelyFraud
		fraud := c.Label == "fraud"
		switch {
		case flagged && fraud:
			res.tp++
		case flagged && !fraud:
			res.fp++
		case !flagged && fraud:
			res.fn++
		default:
			res.tn++
		}
		k := res.byKind[c.Kind]
		k[1]++
		if flagged {
			k[0]++
		}
		res.byKind[c.Kind] = k
		res.scores = append(res.scores, scored{a.Risk.Score, fraud})
	}
	return res
}

// docMinimums reads the recorded minimums from docs/fraud.md.
func docMinimums(t *testing.T) (precision, recall float64) {
	t.Helper()
	b, err := os.ReadFile("../../../docs/fraud.md")
	if err != nil {
		t.Fatalf("docs/fraud.md: %v", err)
	}
	m := regexp.MustCompile(`(?i)minimum precision \*\*([0-9.]+)\*\*, minimum recall \*\*([0-9.]+)\*\*`).FindSubmatch(b)
	if m == nil {
		t.Fatal("docs/fraud.md does not record \"minimum precision **P**, minimum recall **R**\"")
	}
	p, err1 := strconv.ParseFloat(string(m[1]), 64)
	r, err2 := strconv.ParseFloat(string(m[2]), 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("bad minimums %q %q", m[1], m[2])
	}
	return p, r
}

// TestEvalSet scores the labelled synthetic set at the default threshold
// and checks precision and recall against the minimums recorded in
// docs/fraud.md. Run with -v for the per-kind table and a threshold sweep.
func TestEvalSet(t *testing.T) {
	cases := loadEvalSet(t)
	if len(cases) < 2000 {
		t.Fatalf("only %d cases", len(cases))
	}
	cfg := DefaultConfig()
	res := runEval(t, cases, cfg)
	p, r := res.precision(), res.recall()
	t.Logf("threshold %d: precision %.4f recall %.4f (tp %d fp %d fn %d tn %d)", cfg.Threshold, p, r, res.tp, res.fp, res.fn, res.tn)

	kinds := make([]string, 0, len(res.byKind))
	for k := range res.byKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		v := res.byKind[k]
		t.Logf("  %-20s flagged %4d / %4d (%.1f%%)", k, v[0], v[1], 100*float64(v[0])/float64(v[1]))
	}
	if testing.Verbose() {
		var sb strings.Builder
		for th := 30; th <= 80; th += 5 {
			var tp, fp, fn int
			for _, s := range res.scores {
				switch {
				case s.score >= th && s.fraud:
					tp++
				case s.score >= th:
					fp++
				case s.fraud:
					fn++
				}
			}
			fmt.Fprintf(&sb, "\n  threshold %d: precision %.3f recall %.3f", th, float64(tp)/float64(max(1, tp+fp)), float64(tp)/float64(max(1, tp+fn)))
		}
		t.Log("sweep (same history, scores re-thresholded):" + sb.String())
	}

	minP, minR := docMinimums(t)
	if p < minP || r < minR {
		t.Errorf("precision %.4f / recall %.4f below the recorded minimums %.2f / %.2f (docs/fraud.md)", p, r, minP, minR)
	}
}

// TestEvalSetDeterministic: the committed set is what the generator makes.
func TestEvalSetShape(t *testing.T) {
	cases := loadEvalSet(t)
	var fraud int
	last := time.Time{}
	for i, c := range cases {
		if c.ID != i+1 || (c.Label != "fraud" && c.Label != "legit") || c.Input.Email == "" || c.At.Before(last) {
			t.Fatalf("bad row %d: %+v", i+1, c)
		}
		last = c.At
		if c.Label == "fraud" {
			fraud++
		}
	}
	if fraud < len(cases)/5 || fraud > len(cases)/2 {
		t.Errorf("%d fraud rows of %d", fraud, len(cases))
	}
}
