package restapi

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/emaildata/emaildata/internal/platform/metrics"
)

// routeUnmatched is the metrics route label of requests no route matched
// (404 and 405 answers of the mux).
const routeUnmatched = metrics.RouteUnmatched

// dispatch serves mux, counting in the metrics the requests no route
// matches (which the mux answers itself, outside any instrumented route),
// and first undoing the URL form the C# SDK gives GET /v5/td (see
// csharpTDPath).
func (s *Server) dispatch(mux *http.ServeMux) http.Handler {
	unmatched := s.instrument(routeUnmatched, mux)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r2, ok := csharpTDPath(r); ok {
			r = r2
		}
		if _, pattern := mux.Handler(r); pattern == "" {
			unmatched.ServeHTTP(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// The official C# SDK builds its name and postal queries of GET /v5/td
// with '?' where '&' belongs: with an email,
//
//	/v5/td?email=E&api_key=K?first=F?last=L?street=S?city=C?state=ST
//
// and without one, with the key glued to the path,
//
//	/v5/td&api_key=K?state=ST?first=F?last=L?street=S?city=C
//
// csharpTDPath turns the second form into the first, and tdQuery reads a
// '?' that is followed by a GET /v5/td parameter name and '=' as '&'. The
// SDK URL-encodes every value, so a literal '?' in a value arrives as %3F
// and is never taken for a separator.
func csharpTDPath(r *http.Request) (*http.Request, bool) {
	const prefix = "/v5/td&"
	p := r.URL.EscapedPath()
	if r.Method != http.MethodGet || !strings.HasPrefix(p, prefix) {
		return nil, false
	}
	u := *r.URL
	u.Path, u.RawPath = "/v5/td", ""
	u.RawQuery = p[len(prefix):]
	if r.URL.RawQuery != "" {
		u.RawQuery += "&" + r.URL.RawQuery
	}
	r2 := new(http.Request)
	*r2 = *r
	r2.URL = &u
	return r2, true
}

// tdParams are the query parameters of GET /v5/td (those the SDKs send).
var tdParams = []string{
	"api_key", "email", "md5_email", "sha1_email", "first", "middle", "last",
	"street", "city", "state", "zip", "zip4", "fields", "format", "show_available", "timeout",
}

// tdQuery parses GET /v5/td's query, reading the C# SDK's '?' separators
// as '&'.
func tdQuery(r *http.Request) url.Values {
	raw := r.URL.RawQuery
	if strings.IndexByte(raw, '?') >= 0 {
		raw = csharpSeparators(raw)
	}
	q, _ := url.ParseQuery(raw) // as URL.Query does: malformed pairs are dropped
	return q
}

func csharpSeparators(raw string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(raw, '?')
		if i < 0 {
			b.WriteString(raw)
			return b.String()
		}
		b.WriteString(raw[:i])
		rest := raw[i+1:]
		sep := byte('?')
		for _, name := range tdParams {
			if strings.HasPrefix(rest, name+"=") {
				sep = '&'
				break
			}
		}
		b.WriteByte(sep)
		raw = rest
	}
}
