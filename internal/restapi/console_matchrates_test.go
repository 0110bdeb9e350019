package restapi_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// appendList writes an email_append list: people of the suite's store
// (by first, last name and zip) and people it does not hold, 20 rows in
// all, so that every rate is a whole multiple of 5 % (no rounding tie).
func appendList(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("id,first_name,last_name,zip\n")
	for i := range 20 {
		if i%4 == 3 {
			fmt.Fprintf(&b, "%d,Nobody%d,Unknownperson,99999\n", i+1, i)
			continue
		}
		r := peopleData[i*7]
		fmt.Fprintf(&b, "%d,%s,%s,%s\n", i+1, r.First, r.Last, r.Zip)
	}
	path := filepath.Join(t.TempDir(), "append-list.csv")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkMatchRates signs in with an email_append key, runs a list and
// asserts that the console's match rates are the REST status's
// email_match_type counts over its records, with the rate of any match.
func checkMatchRates(t *testing.T, p *page) {
	t.Helper()
	p.run(chromedp.Click(chromedp.CSS("#signout")))
	p.wait("signed out", `!document.getElementById('signin').hidden`, 5*time.Second)
	p.run(chromedp.SendKeys(chromedp.CSS("#key"), keyAppend+"\r"))
	p.wait("signed in with the append key", `!document.getElementById('app').hidden && document.getElementById('service').value === 'email_append'`, 10*time.Second)
	id := p.upload(appendList(t), "email_append", "process")
	row := fmt.Sprintf(`document.querySelector('#lists-table tr[data-list-id="%d"]')`, id)
	p.wait("the append list done", row+`?.querySelector('[data-status="Results"]')`, 60*time.Second)
	p.run(chromedp.Click(chromedp.CSS(fmt.Sprintf(`#lists-table tr[data-list-id="%d"] button`, id))))
	p.wait("the match rates", `[...document.querySelectorAll('#detail-body caption')].some(c => c.textContent === 'Match rates')`, 15*time.Second)
	p.shot("match-rates")
	shown := eval[[][]string](p, `[...[...document.querySelectorAll('#detail-body table')].find(t => t.caption?.textContent === 'Match rates').tBodies[0].rows]
		.map(r => [...r.cells].map(c => c.textContent))`)

	st := restStatus(t, keyAppend, id)
	records := int64(st["records"].(float64))
	svc, _ := st["services"].(map[string]any)["email_append"].(map[string]any)
	rep, _ := svc["reporting"].(map[string]any)
	types, _ := rep["email_match_type"].(map[string]any)
	if records != 20 || len(types) == 0 {
		t.Fatalf("REST status: %d records, email_match_type %v", records, types)
	}
	rate := func(n int64) string { return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(records)) }
	want := map[string][2]string{}
	var any int64
	for k, v := range types {
		n := int64(v.(float64))
		any += n
		want[k] = [2]string{rate(n), strconv.FormatInt(n, 10)}
	}
	want["Any match"] = [2]string{rate(any), strconv.FormatInt(any, 10)}
	if any == 0 {
		t.Errorf("no row matched (%v): the rates compare nothing", types)
	}
	got := map[string][2]string{}
	for _, r := range shown {
		if len(r) == 3 {
			got[r[0]] = [2]string{r[1], r[2]}
		}
	}
	t.Logf("match rates: console %v, REST %v of %d", got, types, records)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("console match rates %v, REST status gives %v", got, want)
	}
	p.axe(p.axeSrc, "match rates")
}
