package restapi_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emaildata/emaildata/internal/restapi"
)

// These tests run API servers of their own, with the throttles they test
// set small (the suite's server has budgets past what its tests refuse).
// The failure counts read an injected clock, so they are exact; the body
// deadlines are the kernel's and read the wall clock, so the tests of
// slow bodies assert outcomes (cut or not), never times.

// testClock is a clock the tests move; the server reads it concurrently.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func newTestClock() *testClock { return &testClock{t: time.Unix(1_700_000_000, 0)} }

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// startThrottledAPI starts an API server with c until the test ends.
func startThrottledAPI(t *testing.T, c restapi.Config) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	addr, err := startAPI(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	return "http://" + addr
}

// clientFrom is an HTTP client whose connections come from the loopback
// address ip (all of 127.0.0.0/8 is this machine's), a client address of
// its own for the server's failure counts.
func clientFrom(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}, Timeout: 30 * time.Second}
}

func requestTo(t *testing.T, base, method, path, key string, body []byte, contentType string) *http.Request {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("api_key", key)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	return req
}

func evPath(key string) string {
	return "/v5/ev?" + url.Values{"api_key": {key}, "email": {"someone@good.test"}, "smtp": {"false"}}.Encode()
}

func wantAnswer(t *testing.T, what string, r response, code int, retryAfter, bodyHas string) {
	t.Helper()
	if r.code != code || !strings.Contains(string(r.body), bodyHas) || r.header.Get("Retry-After") != retryAfter {
		t.Fatalf("%s: %d Retry-After %q %q; want %d Retry-After %q with %q", what, r.code, r.header.Get("Retry-After"), r.body, code, retryAfter, bodyHas)
	}
}

// TestFailedKeyChecksThrottleTheAddress (issue 30, item 6): failed key
// checks are counted per client address; past the burst the address gets
// 429 with Retry-After on every route family, its keys unchecked, while
// the same real key from another address works, so nobody can lock a key
// out. Requests without a key are not guesses and count nothing.
func TestFailedKeyChecksThrottleTheAddress(t *testing.T) {
	clock := newTestClock()
	base := startThrottledAPI(t, restapi.Config{Now: clock.Now,
		Throttle: restapi.ThrottleConfig{AuthFailureBurst: 3, AuthFailureRate: 0.5}})
	attacker, other, keyless := clientFrom("127.0.0.1"), clientFrom("127.0.0.2"), clientFrom("127.0.0.3")
	const wrong = "not-a-real-key-000000000"

	for i := range 3 {
		wantAnswer(t, fmt.Sprintf("guess %d", i+1), doWith(t, attacker, requestTo(t, base, "GET", evPath(wrong), "", nil, "")), 401, "", "Invalid API key.")
	}
	wantAnswer(t, "4th guess", doWith(t, attacker, requestTo(t, base, "GET", evPath(wrong), "", nil, "")),
		429, "2", "Too many failed API key checks from this address.")
	// The address is throttled, whatever it presents: a real key is not
	// even looked up (else the throttle would still check guesses).
	wantAnswer(t, "a real key from the throttled address", doWith(t, attacker, requestTo(t, base, "GET", "/v5/list/999999999", keyAcme, nil, "")),
		429, "2", `"error":"RateLimited","message":"too many failed API key checks from this address; retry after 2s"`)
	body, ct := multipartFile(t, "feedback.tsv", []byte("email\tfraud_type\nx@example.com\tspam\n"))
	wantAnswer(t, "feedback from the throttled address", doWith(t, attacker, requestTo(t, base, "POST", "/feedback/v1?api_key="+keyFraud, "", body, ct)),
		429, "2", "Too many failed API key checks from this address.")

	// The same key from another address works; that address has its own count.
	wantAnswer(t, "the real key from another address", doWith(t, other, requestTo(t, base, "GET", "/v5/list/999999999", keyAcme, nil, "")),
		404, "", "List not found: 999999999")
	wantAnswer(t, "a guess from another address", doWith(t, other, requestTo(t, base, "GET", evPath(wrong), "", nil, "")), 401, "", "Invalid API key.")

	// Missing keys are no guesses.
	for range 5 {
		wantAnswer(t, "no key", doWith(t, keyless, requestTo(t, base, "GET", "/v5/list/1", "", nil, "")), 401, "", "missing API key")
	}
	wantAnswer(t, "a guess after missing keys", doWith(t, keyless, requestTo(t, base, "GET", evPath(wrong), "", nil, "")), 401, "", "Invalid API key.")

	// One failure comes back every 2 s; a right key spends none.
	clock.Advance(2 * time.Second)
	wantAnswer(t, "the real key after 2 s", doWith(t, attacker, requestTo(t, base, "GET", "/v5/list/999999999", keyAcme, nil, "")), 404, "", "List not found")
	wantAnswer(t, "a guess after 2 s", doWith(t, attacker, requestTo(t, base, "GET", evPath(wrong), "", nil, "")), 401, "", "Invalid API key.")
	wantAnswer(t, "the next guess", doWith(t, attacker, requestTo(t, base, "GET", evPath(wrong), "", nil, "")), 429, "2", "Too many failed")
}

// TestKeyGuessingAtHighRate: with the chart's defaults, random keys sent
// from one address as fast as 16 connections go get exactly the burst of
// 401s and then only 429s (the clock stands still): concurrent guesses
// cannot slip past the count. A real key from another address still works.
func TestKeyGuessingAtHighRate(t *testing.T) {
	clock := newTestClock()
	base := startThrottledAPI(t, restapi.Config{Now: clock.Now, Throttle: restapi.DefaultThrottle()})
	const workers, each = 16, 64
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
			for range each {
				var b [12]byte
				_, _ = rand.Read(b[:])
				resp, err := cl.Get(base + evPath(hex.EncodeToString(b[:])))
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mu.Lock()
				codes[resp.StatusCode]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	burst := restapi.DefaultThrottle().AuthFailureBurst
	if codes[401] != burst || codes[429] != workers*each-burst {
		t.Fatalf("answers %v; want %d × 401 and %d × 429", codes, burst, workers*each-burst)
	}
	if r := doWith(t, clientFrom("127.0.0.2"), requestTo(t, base, "GET", evPath(keyAcme), "", nil, "")); r.code != 200 {
		t.Fatalf("a real key from another address: %d %s", r.code, r.body)
	}
}

// TestForbiddenCallsPerTenant: a tenant's calls refused with 403 spend a
// budget of the tenant's; past it they get 429, on every key of the tenant,
// while the tenant's allowed calls and other tenants' 403s are unaffected.
func TestForbiddenCallsPerTenant(t *testing.T) {
	clock := newTestClock()
	base := startThrottledAPI(t, restapi.Config{Now: clock.Now,
		Throttle: restapi.ThrottleConfig{ForbiddenBurst: 2, ForbiddenRate: 1}})
	get := func(path string) response { return do(t, requestTo(t, base, "GET", path, "", nil, "")) }
	frPath := func(key string) string { return strings.Replace(evPath(key), "/v5/ev", "/fr", 1) }

	wantAnswer(t, "1st", get(evPath(keyFraud)), 403, "", "This API key is not enabled for email_validation.")
	wantAnswer(t, "2nd", get(evPath(keyFraud)), 403, "", "not enabled")
	wantAnswer(t, "3rd", get(evPath(keyFraud)), 429, "1", "Too many calls this tenant's keys are not enabled for.")
	wantAnswer(t, "another key of the tenant", get(frPath(keyMulti)), 429, "1", "Too many calls this tenant's keys are not enabled for.")
	wantAnswer(t, "a list call of the tenant", do(t, requestTo(t, base, "POST", "/v5/list", keyFraud, []byte("a@b.test\n"), "text/csv")),
		429, "1", `"message":"too many calls this tenant's keys are not enabled for; retry after 1s"`)
	if r := get(evPath(keyMulti)); r.code != 200 {
		t.Fatalf("an allowed call of the tenant: %d %s", r.code, r.body)
	}
	wantAnswer(t, "another tenant", get(frPath(keyGlobex)), 403, "", "This API key is not enabled for fraud.")
	clock.Advance(time.Second)
	wantAnswer(t, "after 1 s", get(evPath(keyFraud)), 403, "", "not enabled")
}
