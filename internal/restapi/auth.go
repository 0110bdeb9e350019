package restapi

import (
	"context"
	"net/http"
	"strings"
)

// listKey authenticates list endpoints, which take the key in the api_key
// header, and applies the key's rate limit.
func (s *Server) listKey(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		presented := r.Header.Get("api_key")
		if presented == "" {
			presented = r.Header.Get("Api-Key") // a proxy may canonicalise the name
		}
		if presented == "" {
			writeError(w, r, http.StatusUnauthorized, "Unauthorized", "missing API key: send it in the api_key header")
			return
		}
		k, ok := s.keys.Lookup(strings.TrimSpace(presented))
		if !ok {
			writeError(w, r, http.StatusUnauthorized, "Unauthorized", "Invalid API key.")
			return
		}
		if res := s.limiter(k).Reserve(); !res.OK() || res.Delay() > 0 {
			delay := res.Delay()
			res.Cancel()
			tooMany(w, r, delay)
			return
		}
		next(w, r.WithContext(context.WithValue(r.Context(), keyCtx, k)))
	}
}
