package restapi_test

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"testing"
	"time"
)

// TestAnotherTenantsListTakesAsLongAsAMissingOne (issue 30, item 9): GET
// /v5/list/{id} for another tenant's live list and for an ID that does not
// exist must not be told apart by their time. Before the fix they took
// 2.8 ms and 1.6 ms: one request classified them right 93 % of the time.
//
// The two kinds of request alternate (in a random order within each pair,
// over one keep-alive connection), so a machine that slows down or speeds
// up during the run slows both alike; the test compares their medians,
// and bounds the difference by a quarter of the spread (the larger
// interquartile range) rather than by a time, so a loaded machine widens
// the bound with the noise. A difference as large as the one the issue
// measured is several spreads, and fails it: with the old lookup made to
// spin 1.2 ms, or 300 µs, for another tenant's list, the test failed
// (medians 1.35 ms and 0.38 ms apart, IQRs 0.5-0.9 ms); at 150 µs it
// passed. (The old code itself measured within 50 µs on this machine: the
// extra work was one list handed back by the cache and discarded, which
// TestLookupOfAnotherTenantsListDoesTheWorkOfAMissingOne counts exactly.)
func TestAnotherTenantsListTakesAsLongAsAMissingOne(t *testing.T) {
	other := listID(t, submit(t, keyGlobex, nil, "timing.csv", []byte("a@example.com\n")))
	waitStatus(t, keyGlobex, other, "Results") // live, and long in the API's cache
	missing := other + 1_000_000
	cl := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	get := func(id int64) time.Duration {
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/v5/list/%d", baseURL, id), nil)
		req.Header.Set("api_key", keyAcme)
		start := time.Now()
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		d := time.Since(start)
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("list %d: %d, want 404", id, resp.StatusCode)
		}
		return d
	}
	const warmup, pairs = 50, 400
	var others, missings []time.Duration
	for i := range warmup + pairs {
		first, second := other, missing
		if rand.IntN(2) == 0 {
			first, second = missing, other
		}
		a, b := get(first), get(second)
		if i < warmup {
			continue
		}
		if first == other {
			others, missings = append(others, a), append(missings, b)
		} else {
			others, missings = append(others, b), append(missings, a)
		}
	}
	mo, iqrO := medianIQR(others)
	mm, iqrM := medianIQR(missings)
	diff, spread := mo-mm, max(iqrO, iqrM)
	t.Logf("another tenant's list: median %v, IQR %v; a missing ID: median %v, IQR %v; difference %v", mo, iqrO, mm, iqrM, diff)
	if diff.Abs() > spread/4 {
		t.Errorf("the medians differ by %v, more than a quarter of the spread (%v): the time tells another tenant's list from a missing ID", diff, spread)
	}
}

// medianIQR returns the median and the interquartile range of ds.
func medianIQR(ds []time.Duration) (median, iqr time.Duration) {
	s := slices.Clone(ds)
	slices.Sort(s)
	q := func(p float64) time.Duration { return s[int(p*float64(len(s)-1))] }
	return q(0.5), q(0.75) - q(0.25)
}
