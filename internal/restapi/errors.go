package restapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/emaildata/emaildata/internal/platform/logging"
)

// errorBody is the JSON error shape of the list endpoints.
type errorBody struct {
	Error     string `json:"error"`
	Message   string `json:"message"`
	RequestID string `json:"request_id,omitempty"`
}

// writeError writes a JSON error. Messages are written for clients and
// never carry internal errors.
func writeError(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	writeJSON(w, status, errorBody{Error: code, Message: msg, RequestID: requestIDFrom(r.Context())})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeJSONBytes writes an already encoded JSON body.
func writeJSONBytes(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func writeText(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(msg + "\n"))
}

// tooMany answers a rate-limited request; why says which limit, lower case.
func tooMany(w http.ResponseWriter, r *http.Request, retry time.Duration, why string) {
	secs := retrySeconds(retry)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	writeError(w, r, http.StatusTooManyRequests, "RateLimited", why+"; retry after "+strconv.Itoa(secs)+"s")
}

// internalError logs err with the request ID and answers 500 without it.
func (s *Server) internalError(w http.ResponseWriter, r *http.Request, what string, err error) {
	s.log.Error(what, logging.KeyRequestID, requestIDFrom(r.Context()), logging.KeyError, err.Error())
	writeError(w, r, http.StatusInternalServerError, "InternalError", "internal error; quote request id "+requestIDFrom(r.Context()))
}
