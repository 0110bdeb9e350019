package restapi_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/emaildata/emaildata/internal/kits/testkit/redistest"
	"github.com/emaildata/emaildata/internal/platform/apikey"
	"github.com/emaildata/emaildata/internal/restapi"
	"github.com/emaildata/emaildata/internal/wiring"
)

// The tenants of the feedback trust tests: each has one fraud key.
var fraudTenants = []string{"t30-alpha", "t30-beta", "t30-gamma", "t30-delta", "t30-eps"}

func fraudKey(tenant string) string { return tenant + "-fraud-key-0000000001" }

var fraudKeysOnce sync.Once

// createFraudKeys adds the key Secrets of fraudTenants (once).
func createFraudKeys(t testing.TB) {
	t.Helper()
	fraudKeysOnce.Do(func() {
		for _, tenant := range fraudTenants {
			sec := &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: nsSystem, Name: "key-" + tenant, Labels: map[string]string{apikey.Label: "true"}},
				StringData: map[string]string{"key": fraudKey(tenant), "services": "fraud", "tenant": tenant},
			}
			if err := k8s.Create(context.Background(), sec); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// pgSchemaURL returns the URL of the test database with a schema of the
// test's own as search_path (so that the API's tables are the test's),
// dropped when the test ends. Without PostgreSQL the test is skipped,
// except under CI=true where it fails.
func pgSchemaURL(t testing.TB) string {
	t.Helper()
	base := os.Getenv("DATABASE_URL")
	if base == "" {
		base = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, base)
	if err == nil {
		err = pool.Ping(ctx)
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL not reachable (required under CI=true): %v", err)
		}
		t.Skipf("PostgreSQL not reachable: %v", err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "fraudapi_" + hex.EncodeToString(b[:])
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		defer pool.Close()
		if _, err := pool.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema: %v", err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	qv := u.Query()
	qv.Set("search_path", schema)
	u.RawQuery = qv.Encode()
	return u.String()
}

// fraudAPI starts an API whose fraud history and feedback are kept in the
// named store ("postgres" or "redis", on a key space of the test's own),
// with the fraud configuration fraudConfig (JSON over the defaults), and
// returns its base URL once the fraud tenants' keys work on it.
func fraudAPI(t testing.TB, store, fraudConfig string, c restapi.Config) string {
	t.Helper()
	createFraudKeys(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	dir := t.TempDir()
	fc := wiring.FraudConfig{
		ConfigPath: filepath.Join(dir, "fraud.json"), HistoryKeyFile: filepath.Join(dir, "history-key"),
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if err := os.WriteFile(fc.ConfigPath, []byte(fraudConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fc.HistoryKeyFile, []byte(rand.Text()), 0o600); err != nil {
		t.Fatal(err)
	}
	switch store {
	case "postgres":
		fc.HistoryURL = pgSchemaURL(t)
	case "redis":
		fc.HistoryURL = redistest.URL(t, "fraudapi")
	default:
		t.Fatalf("store %q", store)
	}
	scorer, err := wiring.NewFraud(ctx, fc, peopleStore)
	if err != nil {
		t.Fatal(err)
	}
	c.Fraud = scorer
	addr, err := startAPI(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + addr
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, err := httpGet(base+"/fr?"+q("api_key", fraudKey(fraudTenants[len(fraudTenants)-1]), "email", "probe@good.test").Encode(), "")
		if err == nil && code == http.StatusOK {
			return base
		}
		if time.Now().After(deadline) {
			t.Fatalf("the fraud tenants' keys do not work: %d %v", code, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// tenantClient calls one API as one tenant.
type tenantClient struct {
	t      *testing.T
	base   string
	tenant string
}

func (c tenantClient) fr(kv ...string) frAnswer {
	c.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, c.base+"/fr?"+q(append([]string{"api_key", fraudKey(c.tenant)}, kv...)...).Encode(), nil)
	var a frAnswer
	jsonInto(c.t, do(c.t, req), &a)
	return a
}

func (c tenantClient) feedback(file string) response {
	c.t.Helper()
	body, ct := multipartFile(c.t, "feedback.tsv", []byte(file))
	return postFeedback(c.t, c.base, fraudKey(c.tenant), body, ct)
}

func (c tenantClient) reports(method string, kv ...string) response {
	c.t.Helper()
	req, _ := http.NewRequest(method, c.base+"/feedback/v1/reports?"+q(append([]string{"api_key", fraudKey(c.tenant)}, kv...)...).Encode(), nil)
	return do(c.t, req)
}

type frAnswer struct {
	Assessment string `json:"assessment"`
	Risk       struct {
		Score        int `json:"score"`
		TumblingRisk int `json:"tumbling_risk"`
	} `json:"risk"`
	Reasons []struct {
		Code   string `json:"code"`
		Points int    `json:"points"`
		Source string `json:"source"`
	} `json:"reasons"`
}

// points maps the history and feedback reasons to "points/source".
func (a frAnswer) points() map[string]string {
	out := map[string]string{}
	for _, r := range a.Reasons {
		if r.Source != "" {
			out[r.Code] = fmt.Sprintf("%d/%s", r.Points, r.Source)
		}
	}
	return out
}

func (a frAnswer) has(code string) bool {
	for _, r := range a.Reasons {
		if r.Code == code {
			return true
		}
	}
	return false
}

func day(daysAgo int) string { return time.Now().UTC().AddDate(0, 0, -daysAgo).Format(time.DateOnly) }

// TestFeedbackTrustModel: with two and more tenants against the real API
// and the real store (PostgreSQL, then Redis), one tenant's report and
// queries move no other tenant's /fr; three tenants' reports move a fourth
// tenant's as network reasons, decayed by age; a tenant over its quota
// gets 429 while another's feedback is recorded; a 2008 report counts for
// nothing; a tenant lists and withdraws its own reports only.
func TestFeedbackTrustModel(t *testing.T) {
	for _, store := range []string{"postgres", "redis"} {
		t.Run(store, func(t *testing.T) {
			base := fraudAPI(t, store, `{"feedback": {"tenant_quota": 3}}`, restapi.Config{})
			alpha, beta := tenantClient{t, base, "t30-alpha"}, tenantClient{t, base, "t30-beta"}
			gamma, delta, eps := tenantClient{t, base, "t30-gamma"}, tenantClient{t, base, "t30-delta"}, tenantClient{t, base, "t30-eps"}
			carol := []string{"email", "carol.t30@good.test", "ip", "73.30.1.2", "phone", "+1 650 253 0030"}

			// One report by alpha: alpha's /fr says so, beta's does not move
			// (beta asks once first: its first sight of the domain and the
			// address moves its own answer).
			beta.fr(carol...)
			betaBefore := beta.fr(carol...)
			r := alpha.feedback("email\tfraud_type\tip\tphone\treference_id\ncarol.t30@good.test\tspam\t73.30.1.2\t+1 650 253 0030\tcase-carol\n")
			if r.code != http.StatusOK || r.json(t)["feedback_id"] == nil {
				t.Fatalf("alpha's feedback: %d %s", r.code, r.body)
			}
			alphaFile := r.json(t)["feedback_id"].(string)
			got := alpha.fr(carol...).points()
			for c, want := range map[string]string{"email_reported": "45/own", "ip_reported": "25/own", "phone_reported": "25/own", "email_reported_network": ""} {
				if got[c] != want {
					t.Errorf("alpha's %s: %q, want %q (%v)", c, got[c], want, got)
				}
			}
			betaAfter := beta.fr(carol...)
			if betaAfter.Risk.Score != betaBefore.Risk.Score || betaAfter.Assessment != betaBefore.Assessment ||
				betaAfter.has("email_reported") || betaAfter.has("ip_reported") || betaAfter.has("email_reported_network") {
				t.Errorf("beta's /fr moved with alpha's report: %d %s -> %d %s %v", betaBefore.Risk.Score, betaBefore.Assessment,
					betaAfter.Risk.Score, betaAfter.Assessment, betaAfter.points())
			}

			// alpha's queries move none of beta's velocity, tumbling or activity.
			for range 5 {
				alpha.fr("email", "vel.t30@good.test")
			}
			for i := range 5 {
				alpha.fr("email", fmt.Sprintf("ipuser%d.t30@good.test", i), "ip", "73.30.9.9")
			}
			for _, v := range []string{"tum.t30+a@good.test", "tumt30+b@good.test", "tum.t307@good.test"} {
				alpha.fr("email", v)
			}
			for _, query := range [][]string{{"email", "vel.t30@good.test"}, {"email", "other.t30@good.test", "ip", "73.30.9.9"}, {"email", "t.u.m.t30@good.test"}} {
				a := beta.fr(query...)
				for _, c := range []string{"email_velocity", "ip_velocity", "email_tumbling"} {
					if a.has(c) {
						t.Errorf("beta's %v: %s from alpha's queries (%v)", query, c, a.points())
					}
				}
				if a.Risk.TumblingRisk > 1 {
					t.Errorf("beta's %v: tumbling_risk %d", query, a.Risk.TumblingRisk)
				}
			}
			if a := alpha.fr("email", "vel.t30@good.test"); !a.has("email_velocity") {
				t.Errorf("alpha's own velocity: %v", a.points())
			}
			if a := alpha.fr("email", "t.u.m.t30@good.test"); !a.has("email_tumbling") {
				t.Errorf("alpha's own tumbling: %v", a.points())
			}

			// Network: reports of sam by gamma (today) and delta (90 days ago)
			// move nothing for beta; with eps's (180 days ago), beta gets the
			// network reasons at (1 + 1/2 + 1/4) / 5 of their weight.
			sam := []string{"email", "sam.t30@good.test", "ip", "73.30.7.7", "phone", "+1 650 253 0077"}
			for _, rep := range []struct {
				c    tenantClient
				days int
			}{{gamma, 0}, {delta, 90}} {
				r := rep.c.feedback(fmt.Sprintf("email\tfraud_type\tip\tphone\tdate\nsam.t30@good.test\tchargeback\t73.30.7.7\t+1 650 253 0077\t%s\n", day(rep.days)))
				if r.code != http.StatusOK {
					t.Fatalf("%s's feedback: %d %s", rep.c.tenant, r.code, r.body)
				}
			}
			if p := beta.fr(sam...).points(); p["email_reported_network"] != "" || p["ip_reported_network"] != "" {
				t.Errorf("two other tenants moved beta: %v", p)
			}
			r = eps.feedback(fmt.Sprintf("email\tfraud_type\tip\tphone\tdate\nsam.t30@good.test\tchargeback\t73.30.7.7\t+1 650 253 0077\t%s\n", day(180)))
			if r.code != http.StatusOK {
				t.Fatalf("eps's feedback: %d %s", r.code, r.body)
			}
			got = beta.fr(sam...).points()
			for code, w := range map[string]string{"email_reported_network": "16/network", "ip_reported_network": "9/network", "phone_reported_network": "9/network", "email_reported": ""} {
				if got[code] != w {
					t.Errorf("beta's %s with three reporters: %q, want %q (%v)", code, got[code], w, got)
				}
			}

			// Quota 3: alpha (1 report) sends 3 more: refused whole, 429;
			// beta's file is recorded meanwhile.
			three := "email\tfraud_type\nq1.t30@good.test\tbot\nq2.t30@good.test\tbot\nq3.t30@good.test\tbot\n"
			if r := alpha.feedback(three); r.code != http.StatusTooManyRequests || !strings.HasPrefix(string(r.body), "Feedback quota reached: this tenant keeps 1 reports and may keep 3") {
				t.Errorf("alpha over its quota: %d %s", r.code, r.body)
			}
			if r := beta.feedback(three); r.code != http.StatusOK {
				t.Errorf("beta's feedback while alpha is over its quota: %d %s", r.code, r.body)
			}
			if a := alpha.fr("email", "q1.t30@good.test"); a.has("email_reported") {
				t.Errorf("alpha's refused file counts: %v", a.points())
			}
			if a := beta.fr("email", "q1.t30@good.test"); !a.has("email_reported") {
				t.Errorf("beta's file does not count: %v", a.points())
			}

			// A report dated 2008, beyond the horizon, counts for nothing.
			r = delta.feedback("email\tfraud_type\tdate\nold.t30@good.test\tchargeback\t2008-05-01\n")
			if r.code != http.StatusOK || r.json(t)["skipped_records"] != 1.0 || r.json(t)["feedback_id"] != nil {
				t.Errorf("a 2008 report: %d %s", r.code, r.body)
			}
			if a := delta.fr("email", "old.t30@good.test"); a.has("email_reported") {
				t.Errorf("a 2008 report counts: %v", a.points())
			}

			// Listing: alpha sees its one report, beta none of alpha's.
			r = alpha.reports(http.MethodGet)
			list := r.json(t)["reports"].([]any)
			if r.code != http.StatusOK || len(list) != 1 || list[0].(map[string]any)["reference_id"] != "case-carol" ||
				list[0].(map[string]any)["feedback_id"] != alphaFile || list[0].(map[string]any)["line"] != 2.0 {
				t.Errorf("alpha's reports: %d %s", r.code, r.body)
			}
			r = beta.reports(http.MethodGet, "feedback_id", alphaFile)
			if r.code != http.StatusOK || len(r.json(t)["reports"].([]any)) != 0 {
				t.Errorf("beta lists alpha's file: %d %s", r.code, r.body)
			}
			// Withdrawal: beta withdraws nothing of alpha's; alpha withdraws
			// carol, which stops counting and frees its quota.
			for _, f := range [][]string{{"feedback_id", alphaFile}, {"email", "carol.t30@good.test"}} {
				if r := beta.reports(http.MethodDelete, f...); r.code != http.StatusOK || r.json(t)["withdrawn"] != 0.0 {
					t.Errorf("beta withdraws %v: %d %s", f, r.code, r.body)
				}
			}
			if a := alpha.fr(carol...); !a.has("email_reported") {
				t.Errorf("alpha's report after beta's withdrawals: %v", a.points())
			}
			if r := alpha.reports(http.MethodDelete, "email", "Carol.T30@good.test"); r.code != http.StatusOK || r.json(t)["withdrawn"] != 1.0 {
				t.Errorf("alpha withdraws carol: %d %s", r.code, r.body)
			}
			if a := alpha.fr(carol...); a.has("email_reported") || a.has("ip_reported") {
				t.Errorf("a withdrawn report counts: %v", a.points())
			}
			if r := alpha.feedback(three); r.code != http.StatusOK {
				t.Errorf("alpha within its quota again: %d %s", r.code, r.body)
			}
			// eps withdraws its file: sam is down to two reporters for beta.
			if r := eps.reports(http.MethodDelete, "email", "sam.t30@good.test"); r.code != http.StatusOK || r.json(t)["withdrawn"] != 1.0 {
				t.Errorf("eps withdraws sam: %d %s", r.code, r.body)
			}
			if p := beta.fr(sam...).points(); p["email_reported_network"] != "" {
				t.Errorf("two reporters left, beta: %v", p)
			}
			// Refusals of the report routes.
			for _, tc := range []struct {
				method string
				kv     []string
				code   int
			}{
				{http.MethodDelete, nil, 400},
				{http.MethodDelete, []string{"line", "2"}, 400},
				{http.MethodGet, []string{"email", "not an address"}, 400},
				{http.MethodGet, []string{"limit", "0"}, 400},
				{http.MethodGet, []string{"after", "garbage"}, 400},
			} {
				if r := alpha.reports(tc.method, tc.kv...); r.code != tc.code || !strings.HasPrefix(string(r.body), "Bad request: ") {
					t.Errorf("%s %v: %d %s", tc.method, tc.kv, r.code, r.body)
				}
			}
		})
	}
}

// TestFeedbackWithoutDurableStore: an API with no durable, shared fraud
// history refuses feedback with 503 (nothing is kept in one replica's
// memory), and still answers /fr.
func TestFeedbackWithoutDurableStore(t *testing.T) {
	createFraudKeys(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	scorer, err := wiring.NewFraud(ctx, wiring.FraudConfig{Log: slog.New(slog.NewTextHandler(io.Discard, nil))}, peopleStore)
	if err != nil {
		t.Fatal(err)
	}
	addr, err := startAPI(ctx, restapi.Config{Fraud: scorer})
	if err != nil {
		t.Fatal(err)
	}
	c := tenantClient{t, "http://" + addr, "t30-alpha"}
	if r := c.feedback("email\tfraud_type\nnone.t30@good.test\tbot\n"); r.code != http.StatusServiceUnavailable ||
		!strings.HasPrefix(string(r.body), "Fraud feedback is not kept by this server") {
		t.Errorf("feedback: %d %s", r.code, r.body)
	}
	for _, m := range []string{http.MethodGet, http.MethodDelete} {
		if r := c.reports(m, "email", "none.t30@good.test"); r.code != http.StatusServiceUnavailable {
			t.Errorf("%s reports: %d %s", m, r.code, r.body)
		}
	}
	if a := c.fr("email", "none.t30@good.test"); a.Assessment == "" {
		t.Error("no /fr answer")
	}
}

// TestFeedbackFilesAtOnce: beyond the files a process records at once,
// another file gets 429 with Retry-After, and goes through once the first
// is done.
func TestFeedbackFilesAtOnce(t *testing.T) {
	base := fraudAPI(t, "redis", "", restapi.Config{FeedbackFiles: 1})
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, base+"/feedback/v1?"+q("api_key", fraudKey("t30-alpha")).Encode(), pr)
		req.Header.Set("Content-Type", "multipart/form-data; boundary=XB")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	if _, err := io.WriteString(pw, "--XB\r\nContent-Disposition: form-data; name=\"file\"; filename=\"f.tsv\"\r\n\r\nemail\tfraud_type\nslow.t30@good.test\tbot\n"); err != nil {
		t.Fatal(err)
	}
	beta := tenantClient{t, base, "t30-beta"}
	// Until alpha's request holds the slot, beta's are recorded (200).
	// The deadline only ends a failing test: on a loaded machine (load
	// 36) alpha's handler took more than 10 s to start beside beta's
	// requests one after another, which the pause between them eases.
	deadline := time.Now().Add(time.Minute)
	for ; ; time.Sleep(20 * time.Millisecond) {
		r := beta.feedback("email\tfraud_type\nbusy.t30@good.test\tbot\n")
		if r.code == http.StatusTooManyRequests {
			if r.header.Get("Retry-After") == "" || !strings.HasPrefix(string(r.body), "Too many feedback files being recorded at once") {
				t.Errorf("429: %q %s", r.header.Get("Retry-After"), r.body)
			}
			break
		}
		if r.code != http.StatusOK || time.Now().After(deadline) {
			t.Fatalf("while alpha's file is under way: %d %s", r.code, r.body)
		}
	}
	if _, err := io.WriteString(pw, "\r\n--XB--\r\n"); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if code := <-done; code != http.StatusOK {
		t.Fatalf("alpha's file: %d", code)
	}
	if r := beta.feedback("email\tfraud_type\nafter.t30@good.test\tbot\n"); r.code != http.StatusOK {
		t.Errorf("after alpha's file: %d %s", r.code, r.body)
	}
}
