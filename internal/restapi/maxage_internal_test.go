package restapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/emaildata/emaildata/internal/engine/verify"
	"github.com/emaildata/emaildata/internal/platform/metrics"
	"github.com/emaildata/emaildata/internal/platform/services"
)

// optsVerifier records the options of each call.
type optsVerifier struct{ got []verify.Options }

func (v *optsVerifier) Verify(_ context.Context, address string, o verify.Options) verify.Result {
	v.got = append(v.got, o)
	r := verify.Result{Address: address}
	r.SetCode(verify.CodeDeliverable)
	return r
}

// max_age reaches the engine as the caller's maximum age; without it the
// history's own TTLs decide.
func TestEVMaxAgeReachesEngine(t *testing.T) {
	v := &optsVerifier{}
	s := &Server{cfg: Config{EVSMTP: true}, verifier: v, metrics: metrics.NewAPI()}
	for _, tc := range []struct {
		maxAge string
		want   *time.Duration
	}{
		{"", nil},
		{"0", ptr(time.Duration(0))},
		{"86400", ptr(24 * time.Hour)},
		{"1.5", ptr(1500 * time.Millisecond)},
		{"1e300", ptr(maxMaxAge)},
	} {
		v.got = nil
		q := url.Values{"email": {"a@good.test"}}
		if tc.maxAge != "" {
			q.Set("max_age", tc.maxAge)
		}
		w := httptest.NewRecorder()
		s.verifyEmail(w, httptest.NewRequest(http.MethodGet, "/v5/ev?"+q.Encode(), nil), nil, q)
		if w.Code != 200 || len(v.got) != 1 {
			t.Fatalf("max_age %q: %d %s", tc.maxAge, w.Code, w.Body)
		}
		got := v.got[0].MaxAge
		if (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) || !v.got[0].SMTP {
			t.Errorf("max_age %q: options %+v (max age %v), want SMTP and %v", tc.maxAge, v.got[0], got, tc.want)
		}
	}
}

// A submission's max_age becomes the list's maximum age; other services
// and malformed values are refused.
func TestSubmitMaxAge(t *testing.T) {
	s := &Server{}
	for _, tc := range []struct {
		service, maxAge string
		want            *time.Duration
		bad             string
	}{
		{services.EmailValidation, "604800", ptr(7 * 24 * time.Hour), ""},
		{services.EmailValidation, "0", ptr(time.Duration(0)), ""},
		{services.EmailValidation, "", nil, ""},
		{services.EmailValidation, "-5", nil, "max_age must be a number of seconds, 0 or more"},
		{services.EmailValidation, "NaN", nil, "max_age must be a number of seconds, 0 or more"},
		{services.EmailIntelligence, "60", nil, "max_age applies to email_validation lists only"},
	} {
		q := url.Values{}
		if tc.maxAge != "" {
			q.Set("max_age", tc.maxAge)
		}
		p, status, _, msg := s.parseListParams(httptest.NewRequest(http.MethodPost, "/v5/list?"+q.Encode(), nil), tc.service)
		if tc.bad != "" {
			if status != http.StatusBadRequest || msg != tc.bad {
				t.Errorf("%s max_age %q: %d %q, want 400 %q", tc.service, tc.maxAge, status, msg, tc.bad)
			}
			continue
		}
		if status != 0 || (p.maxAge == nil) != (tc.want == nil) || (p.maxAge != nil && *p.maxAge != *tc.want) {
			t.Errorf("%s max_age %q: %d %q max age %v, want %v", tc.service, tc.maxAge, status, msg, p.maxAge, tc.want)
		}
	}
}

func ptr[T any](v T) *T { return &v }
