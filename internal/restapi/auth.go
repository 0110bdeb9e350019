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

	"github.com/emaildata/emaildata/internal/platform/apikey"
	"github.com/emaildata/emaildata/internal/platform/services"
)

// refusal is why a request's API key was refused.
type refusal int

const (
	refuseMissing   refusal = iota // no key (or, text routes, a required parameter)
	refuseInvalid                  // no such key
	refuseForbidden                // the key is not enabled for the route's service
	refuseLimited                  // the key's rate limit is spent
	refuseMalformed                // the query string cannot be parsed
	refuseThrottled                // a throttle (ThrottleConfig) refuses it; detail says which
)

// refuser answers a refused request in a route family's style. detail is
// the service a key is not enabled for (refuseForbidden), what is wrong
// with the query (refuseMalformed) or the throttle's reason, lower case
// and without a full stop (refuseThrottled).
type refuser func(w http.ResponseWriter, r *http.Request, why refusal, detail string, retry time.Duration)

// authorizer decides whether key k may run the request and which service it
// runs; when it may not, it answers the request itself and returns false.
type authorizer func(w http.ResponseWriter, r *http.Request, k *apikey.Key) (service string, ok bool)

// authenticate is the one key check every route goes through: it refuses a
// malformed query string (whose broken pairs would otherwise be dropped
// silently, the key or a parameter with them), looks up the presented key
// unless the client's address has used up its failed checks (then 429,
// the key unchecked), lets authorize (nil: any key) check its service,
// spends one token of the key's rate limit and, for a request with a body,
// takes one of the key's and the tenant's upload slots, in that order. A
// refused request is answered with refuse and yields ok false.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request, presented string, refuse refuser,
	authorize authorizer) (k *apikey.Key, service string, ok bool) {
	// Every answer to a keyed request is the key's own (and a refusal
	// says whether a key is valid): no shared or browser cache keeps it.
	w.Header().Set("Cache-Control", "no-store")
	if msg := malformedQuery(r.URL.RawQuery); msg != "" {
		refuse(w, r, refuseMalformed, msg, 0)
		return nil, "", false
	}
	if presented == "" {
		refuse(w, r, refuseMissing, "", 0)
		return nil, "", false
	}
	addr := clientAddress(r, s.cfg.Throttle.TrustedProxies)
	found, retry := s.authFailures.guard(addr, func() bool {
		k, ok = s.keys.Lookup(presented)
		return ok
	})
	if retry > 0 {
		refuse(w, r, refuseThrottled, "too many failed API key checks from this address", retry)
		return nil, "", false
	}
	if !found {
		refuse(w, r, refuseInvalid, "", 0)
		return nil, "", false
	}
	if authorize != nil {
		if service, ok = authorize(w, r, k); !ok {
			return nil, "", false
		}
	}
	if res := s.limiter(k).Reserve(); !res.OK() || res.Delay() > 0 {
		delay := res.Delay()
		res.Cancel()
		refuse(w, r, refuseLimited, "", delay)
		return nil, "", false
	}
	if !s.holdUpload(w, r, k, refuse) {
		return nil, "", false
	}
	return k, service, true
}

// uploadRetry is the Retry-After of an upload refused for the slots of its
// key or tenant: when one frees is the other uploads' affair.
const uploadRetry = 5 * time.Second

// holdUpload takes an upload slot of k's key and tenant for a request with
// a body, held until the body is over (bodies); with none free it answers
// 429 and returns false.
func (s *Server) holdUpload(w http.ResponseWriter, r *http.Request, k *apikey.Key, refuse refuser) bool {
	st := bodyStateFrom(r.Context())
	if st == nil {
		return true
	}
	release, full, limit := s.uploads.acquire(k.Secret, k.Tenant)
	if release == nil {
		refuse(w, r, refuseThrottled, fmt.Sprintf("too many uploads at once for this %s (at most %d); retry once one of them has finished", full, limit), uploadRetry)
		return false
	}
	st.hold(release)
	return true
}

// forbid answers a call k's key is not enabled for: 403 naming service
// while k's tenant has such calls left (ThrottleConfig.ForbiddenRate),
// else 429.
func (s *Server) forbid(w http.ResponseWriter, r *http.Request, k *apikey.Key, service string, refuse refuser) {
	if retry := s.forbidden.fail(k.Tenant); retry > 0 {
		refuse(w, r, refuseThrottled, "too many calls this tenant's keys are not enabled for", retry)
		return
	}
	refuse(w, r, refuseForbidden, service, 0)
}

// needs authorizes keys enabled for service.
func (s *Server) needs(service string, refuse refuser) authorizer {
	return func(w http.ResponseWriter, r *http.Request, k *apikey.Key) (string, bool) {
		if !k.Enabled(service) {
			s.forbid(w, r, k, service, refuse)
			return "", false
		}
		return service, true
	}
}

// caller is what the list routes find in the request's context.
type caller struct {
	key     *apikey.Key
	service string // the list service a submission runs; "" on other routes
}

// listKey authenticates list endpoints, which take the key in the api_key
// header and answer errors in JSON; authorize is nil but for submissions.
func (s *Server) listKey(authorize authorizer, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		presented := r.Header.Get("api_key")
		if presented == "" {
			presented = r.Header.Get("Api-Key") // a proxy may canonicalise the name
		}
		k, svc, ok := s.authenticate(w, r, strings.TrimSpace(presented), refuseHeaderJSON, authorize)
		if !ok {
			return
		}
		next(w, r.WithContext(context.WithValue(r.Context(), keyCtx, caller{key: k, service: svc})))
	}
}

func refuseHeaderJSON(w http.ResponseWriter, r *http.Request, why refusal, detail string, retry time.Duration) {
	refuseJSON(w, r, why, detail, retry, "missing API key: send it in the api_key header")
}

func refuseQueryJSON(w http.ResponseWriter, r *http.Request, why refusal, detail string, retry time.Duration) {
	refuseJSON(w, r, why, detail, retry, "missing API key: pass it in the api_key query parameter")
}

func refuseJSON(w http.ResponseWriter, r *http.Request, why refusal, detail string, retry time.Duration, missing string) {
	switch why {
	case refuseMalformed:
		writeError(w, r, http.StatusBadRequest, "BadRequest", "malformed query string: "+detail)
	case refuseMissing:
		writeError(w, r, http.StatusUnauthorized, "Unauthorized", missing)
	case refuseInvalid:
		writeError(w, r, http.StatusUnauthorized, "Unauthorized", "Invalid API key.")
	case refuseForbidden:
		writeError(w, r, http.StatusForbidden, "Forbidden", "this API key is not enabled for "+detail)
	case refuseLimited:
		tooMany(w, r, retry, "too many requests for this API key")
	case refuseThrottled:
		tooMany(w, r, retry, detail)
	}
}

// listService authorizes a submission: the service query parameter names
// the list service, or the key's one enabled list service is taken.
func (s *Server) listService(w http.ResponseWriter, r *http.Request, k *apikey.Key) (string, bool) {
	bad := func(msg string) (string, bool) {
		writeError(w, r, http.StatusBadRequest, "BadRequest", msg)
		return "", false
	}
	enabled := k.EnabledListServices()
	switch svc := r.URL.Query().Get("service"); {
	case svc != "":
		if !isListService(svc) {
			return bad(fmt.Sprintf("service %q is not a list service; choose one of %s", truncate(svc, 40), strings.Join(services.List, ", ")))
		}
		if !k.Enabled(svc) {
			s.forbid(w, r, k, svc, refuseHeaderJSON)
			return "", false
		}
		return svc, true
	case len(enabled) == 0:
		s.forbid(w, r, k, "any list service", refuseHeaderJSON)
		return "", false
	case len(enabled) > 1:
		return bad(fmt.Sprintf("this API key is enabled for several list services; choose one with the service query parameter: %s", strings.Join(enabled, ", ")))
	default:
		return enabled[0], true
	}
}

// bulkKey authenticates POST /v5/ei/bulk (key in the api_key query
// parameter, enabled for demographics); errors are JSON like the body.
func (s *Server) bulkKey(next func(http.ResponseWriter, *http.Request)) http.HandlerFunc {
	authorize := s.needs(services.Demographics, refuseQueryJSON)
	return func(w http.ResponseWriter, r *http.Request) {
		presented := strings.TrimSpace(r.URL.Query().Get("api_key"))
		if _, _, ok := s.authenticate(w, r, presented, refuseQueryJSON, authorize); ok {
			next(w, r)
		}
	}
}

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
	authorize := s.needs(service, refuseText)
	return func(w http.ResponseWriter, r *http.Request) {
		q := parse(r)
		presented := strings.TrimSpace(q.Get("api_key"))
		if !hasParams(q) {
			presented = "" // answered like a missing key
		}
		if k, _, ok := s.authenticate(w, r, presented, refuseText, authorize); ok {
			next(w, r, k, q)
		}
	}
}

func refuseText(w http.ResponseWriter, _ *http.Request, why refusal, detail string, retry time.Duration) {
	switch why {
	case refuseMalformed:
		writeText(w, http.StatusBadRequest, "Malformed query string: "+detail+".")
	case refuseMissing:
		writeText(w, http.StatusBadRequest, "Missing query parameter(s).")
	case refuseInvalid:
		writeText(w, http.StatusUnauthorized, "Invalid API key.")
	case refuseForbidden:
		writeText(w, http.StatusForbidden, fmt.Sprintf("This API key is not enabled for %s.", detail))
	case refuseLimited, refuseThrottled:
		msg := "Too many requests for this API key."
		if why == refuseThrottled {
			msg = strings.ToUpper(detail[:1]) + detail[1:] + "."
		}
		w.Header().Set("Retry-After", strconv.Itoa(retrySeconds(retry)))
		writeText(w, http.StatusTooManyRequests, msg)
	}
}

// retrySeconds is a Retry-After: whole seconds, at least 1.
func retrySeconds(retry time.Duration) int { return max(1, int(math.Ceil(retry.Seconds()))) }

// malformedQuery says what url.ParseQuery would fail on in a raw query,
// "" when nothing: a percent sign not followed by two hex digits, or a
// semicolon (not a separator since Go 1.17). ParseQuery drops such a pair
// and carries on, so a request would lose its key or a parameter without a
// word; these requests are refused instead. It scans without allocating,
// as every request pays for it (FuzzMalformedQuery holds it to ParseQuery).
func malformedQuery(raw string) string {
	for i := 0; i < len(raw); i++ {
		switch raw[i] {
		case ';':
			return "a semicolon does not separate parameters; use & (or encode a semicolon in a value as %3B)"
		case '%':
			if i+2 >= len(raw) || !isHex(raw[i+1]) || !isHex(raw[i+2]) {
				return fmt.Sprintf("%q is not a valid percent-encoding (a %% is followed by two hex digits; encode a %% itself as %%25)",
					strings.ToValidUTF8(raw[i:min(i+3, len(raw))], "?"))
			}
			i += 2
		}
	}
	return ""
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
