package fraud

// The evaluation of the fraud scorer before the trust model (b2e2822: no
// tenants) under the models of TestEvalSet: every query and every report
// goes to one history. It runs in that version's package, on this set
// (docs/fraud.md, "Evaluation"):
//
//	git archive b2e2822 | tar -x -C /tmp/before
//	cp internal/refdata/fraud/testdata/evalset.jsonl /tmp/before/internal/refdata/fraud/testdata/
//	cp hack/fraud-evalset/testdata/before/evalbefore_test.go /tmp/before/internal/refdata/fraud/
//	(cd /tmp/before && go test ./internal/refdata/fraud/ -run TestEvalBefore -v)

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"sort"
	"testing"
	"time"
)

type beforeExtra struct {
	Tenant string `json:"tenant"`
	Report *struct {
		At time.Time `json:"at"`
	} `json:"report"`
}

func TestEvalBefore(t *testing.T) {
	cases := loadEvalSet(t)
	f, _ := os.Open("testdata/evalset.jsonl")
	defer f.Close()
	var extra []beforeExtra
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e beforeExtra
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		extra = append(extra, e)
	}
	for _, m := range []struct {
		name              string
		feedback, hostile bool
	}{{"no feedback", false, false}, {"honest feedback", true, false}, {"honest feedback, one hostile tenant", true, true}} {
		type ev struct {
			at     time.Time
			i      int
			report bool
		}
		var evs []ev
		for i, c := range cases {
			evs = append(evs, ev{c.At, i, false})
			if m.feedback && extra[i].Report != nil {
				evs = append(evs, ev{extra[i].Report.At, i, true})
			}
			if m.hostile && extra[i].Tenant == "shop-6" && c.Label == "legit" {
				evs = append(evs, ev{c.At.Add(time.Second), i, true})
			}
		}
		sort.SliceStable(evs, func(a, b int) bool { return evs[a].at.Before(evs[b].at) })
		var now time.Time
		s := evalScorer(t, cases, DefaultConfig(), &now)
		res := evalResult{byKind: map[string][2]int{}}
		for _, e := range evs {
			now = e.at
			c := cases[e.i]
			if e.report {
				r, err := s.ReportOf(ReportInput{Email: c.Input.Email, IP: c.Input.IP, Phone: c.Input.Phone, Country: c.Input.Country, Type: "other"})
				if err == nil {
					if err := s.Record(context.Background(), []Report{r}); err != nil {
						t.Fatal(err)
					}
				}
				continue
			}
			a := s.Assess(context.Background(), c.Input, c.verifyResult())
			flagged, fraud := a.Assessment == LikelyFraud, c.Label == "fraud"
			switch {
			case flagged && fraud:
				res.tp++
			case flagged:
				res.fp++
			case fraud:
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
		}
		t.Logf("main, %s: precision %.4f recall %.4f (tp %d fp %d fn %d tn %d)", m.name, res.precision(), res.recall(), res.tp, res.fp, res.fn, res.tn)
		var kinds []string
		for k := range res.byKind {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		for _, k := range kinds {
			v := res.byKind[k]
			t.Logf("  %-20s flagged %4d / %4d (%.1f%%)", k, v[0], v[1], 100*float64(v[0])/float64(v[1]))
		}
	}
}
