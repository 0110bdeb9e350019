package restapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"time"

	"github.com/emaildata/emaildata/internal/platform/logging"
)

// RequestIDHeader carries the request ID in both directions.
const RequestIDHeader = "X-Request-Id"

var validRequestID = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// requestID gives every request an ID (a caller's sane one is kept), echoes
// it in the response, and puts it in the context for logs and error bodies.
func (s *Server) requestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(RequestIDHeader)
		if !validRequestID.MatchString(id) {
			var b [12]byte
			_, _ = rand.Read(b[:])
			id = hex.EncodeToString(b[:])
		}
		w.Header().Set(RequestIDHeader, id)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestIDCtx, id)))
	})
}

func requestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(requestIDCtx).(string)
	return id
}

// recoverer turns a panic into a 500 without internals in the body.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("panic serving request", logging.KeyRequestID, requestIDFrom(r.Context()), "panic", fmt.Sprint(v))
				writeError(w, r, http.StatusInternalServerError, "InternalError", "internal error")
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// instrument records requests and latency under the route pattern (never
// the raw path or query: they carry IDs and keys), and logs each request
// without personal data.
func (s *Server) instrument(route string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		h.ServeHTTP(rec, r)
		d := time.Since(start)
		s.metrics.Request(route, rec.code, d)
		if route != "GET /healthz" && route != "GET /readyz" {
			s.log.Debug("request", "route", route, "code", rec.code, "ms", math.Round(float64(d.Microseconds())/10)/100,
				logging.KeyRequestID, requestIDFrom(r.Context()))
		}
	})
}

type statusRecorder struct {
	http.ResponseWriter
	code    int
	written bool
}

func (r *statusRecorder) WriteHeader(code int) {
	if !r.written {
		r.code, r.written = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(p []byte) (int, error) {
	r.written = true
	return r.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
