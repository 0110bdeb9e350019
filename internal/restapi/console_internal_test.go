package restapi

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/emaildata/emaildata/internal/platform/apikey"
)

// TestConsoleSetting: the console is served by default, at /console/
// (and /console redirects there); ConsoleDisabled takes it away.
func TestConsoleSetting(t *testing.T) {
	for _, c := range []struct {
		disabled bool
		want     map[string]int
	}{
		{false, map[string]int{"/console/": http.StatusOK, "/console": http.StatusMovedPermanently, "/console/app.js": http.StatusOK}},
		{true, map[string]int{"/console/": http.StatusNotFound, "/console": http.StatusNotFound, "/console/app.js": http.StatusNotFound}},
	} {
		s := New(Config{Namespace: routesNS, ConsoleDisabled: c.disabled}, apikey.NewStore(), nil, nil, nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
		h := s.Handler()
		for path, code := range c.want {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
			if rec.Code != code {
				t.Errorf("ConsoleDisabled %v: GET %s %d, want %d", c.disabled, path, rec.Code, code)
			}
			if code == http.StatusOK && rec.Header().Get("X-Frame-Options") != "DENY" {
				t.Errorf("GET %s: no X-Frame-Options DENY", path)
			}
		}
	}
}
