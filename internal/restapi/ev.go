package restapi

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/emaildata/emaildata/internal/engine/evhistory"
	"github.com/emaildata/emaildata/internal/engine/verify"
	"github.com/emaildata/emaildata/internal/platform/apikey"
	"github.com/emaildata/emaildata/internal/platform/services"
)

// Verifier verifies one address; *verify.Engine implements it.
type Verifier interface {
	Verify(ctx context.Context, address string, o verify.Options) verify.Result
}

// evTimeout bounds for GET /v5/ev, in seconds.
const (
	evDefaultTimeout = 10.0
	evMaxTimeout     = 30.0
)

// maxMaxAge bounds max_age: far beyond any history TTL, and far from
// overflowing a Duration.
const maxMaxAge = 10 * 365 * 24 * time.Hour

// parseMaxAge reads max_age: the oldest verdict from the verification
// history the caller accepts, in seconds (fractions allowed); 0 probes.
func parseMaxAge(v string) (time.Duration, error) {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || f < 0 {
		return 0, errors.New("max_age must be a number of seconds, 0 or more.")
	}
	return time.Duration(min(f, maxMaxAge.Seconds()) * float64(time.Second)), nil
}

// historyTenant is the verification history's tenant of a key: the same
// as its tenant's lists' (the controller reads it from their LabelTenant),
// so a tenant's GET /v5/ev and its lists share their checks, and no other
// tenant's (in the history's default tenant scope).
func historyTenant(k *apikey.Key) string {
	if k == nil {
		return ""
	}
	return evhistory.APITenant(tenantLabel(k.Tenant))
}

// evResponse is the GET /v5/ev body.
type evResponse struct {
	SafeToSend verify.SafeToSendResponse `json:"safe_to_send"`
}

// verifyEmail serves GET /v5/ev: one address, synchronously, within the
// caller's timeout (default 10 s, at most 30 s). smtp=false skips the
// mailbox check.
func (s *Server) verifyEmail(w http.ResponseWriter, r *http.Request, k *apikey.Key, q url.Values) {
	timeout := evDefaultTimeout
	if v := q.Get("timeout"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) || f <= 0 {
			writeText(w, http.StatusBadRequest, "timeout must be a number of seconds greater than 0.")
			return
		}
		timeout = min(f, evMaxTimeout)
	}
	opts := verify.Options{SMTP: s.cfg.EVSMTP, Tenant: historyTenant(k)}
	if v := q.Get("max_age"); v != "" {
		d, err := parseMaxAge(v)
		if err != nil {
			writeText(w, http.StatusBadRequest, err.Error())
			return
		}
		opts.MaxAge = &d
	}
	if v := q.Get("smtp"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			writeText(w, http.StatusBadRequest, "smtp must be true or false.")
			return
		}
		opts.SMTP = b && s.cfg.EVSMTP
	}
	ctx, cancel := context.WithTimeout(r.Context(), time.Duration(timeout*float64(time.Second)))
	defer cancel()
	res := s.verifier.Verify(ctx, q.Get("email"), opts)
	s.metrics.Verdict(services.EmailValidation, int(res.Code))
	writeJSON(w, http.StatusOK, evResponse{SafeToSend: res.SafeToSend()})
}
