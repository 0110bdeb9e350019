package restapi

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/emaildata/emaildata/internal/apikey"
	"github.com/emaildata/emaildata/internal/verify"
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

// queryKey authenticates the single-address endpoints, which take the key
// in the api_key query parameter and answer errors in plain text; email is
// required too. The query is parsed once and handed to next with the key
// (not through the request's context: a copy of the request per call is
// measurable at tens of thousands of requests per second).
func (s *Server) queryKey(service string, next func(http.ResponseWriter, *http.Request, *apikey.Key, url.Values)) http.HandlerFunc {
	return s.textKey(service, func(q url.Values) bool { return q.Get("email") != "" }, parseQuery, next)
}

func parseQuery(r *http.Request) url.Values { return r.URL.Query() }

// textKey is queryKey with the required parameters checked by hasParams
// (a missing one, or a missing api_key, is a 400 Missing query
// parameter(s).) and the query parsed by parse.
func (s *Server) textKey(service string, hasParams func(url.Values) bool, parse func(*http.Request) url.Values,
	next func(http.ResponseWriter, *http.Request, *apikey.Key, url.Values)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q := parse(r)
		presented := strings.TrimSpace(q.Get("api_key"))
		if presented == "" || !hasParams(q) {
			writeText(w, http.StatusBadRequest, "Missing query parameter(s).")
			return
		}
		k, ok := s.keys.Lookup(presented)
		if !ok {
			writeText(w, http.StatusUnauthorized, "Invalid API key.")
			return
		}
		if !k.Enabled(service) {
			writeText(w, http.StatusForbidden, fmt.Sprintf("This API key is not enabled for %s.", service))
			return
		}
		if res := s.limiter(k).Reserve(); !res.OK() || res.Delay() > 0 {
			delay := res.Delay()
			res.Cancel()
			w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(delay.Seconds())))))
			writeText(w, http.StatusTooManyRequests, "Too many requests for this API key.")
			return
		}
		next(w, r, k, q)
	}
}

// evResponse is the GET /v5/ev body.
type evResponse struct {
	SafeToSend verify.SafeToSendResponse `json:"safe_to_send"`
}

// verifyEmail serves GET /v5/ev: one address, synchronously, within the
// caller's timeout (default 10 s, at most 30 s). smtp=false skips the
// mailbox check.
func (s *Server) verifyEmail(w http.ResponseWriter, r *http.Request, _ *apikey.Key, q url.Values) {
	timeout := evDefaultTimeout
	if v := q.Get("timeout"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) || f <= 0 {
			writeText(w, http.StatusBadRequest, "timeout must be a number of seconds greater than 0.")
			return
		}
		timeout = min(f, evMaxTimeout)
	}
	opts := verify.Options{SMTP: s.cfg.EVSMTP}
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
	s.metrics.Verdict(apikey.ServiceEmailValidation, int(res.Code))
	writeJSON(w, http.StatusOK, evResponse{SafeToSend: res.SafeToSend()})
}
