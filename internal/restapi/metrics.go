package restapi

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/emaildata/emaildata/internal/engine/verify"
	"github.com/emaildata/emaildata/internal/platform/logging"
	"github.com/emaildata/emaildata/internal/wiring"
)

// MetricsHandler serves the server's Prometheus metrics. Run serves it on
// its own address (RunOptions.MetricsListen), never on the public one.
func (s *Server) MetricsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", s.metrics.Handler())
	return mux
}

// exportEngine exports the verifier's DNS and SMTP counters (GET /v5/ev
// and GET /fr verify in-process) when it is the verification engine.
func (s *Server) exportEngine() {
	if e, ok := s.verifier.(*verify.Engine); ok && e != nil {
		s.metrics.SetEngine(func() map[string]float64 { return wiring.EngineCounters(e) })
	}
}

// serveMetrics serves MetricsHandler on o's metrics listener or address
// until the returned stop is called; with neither (or the address "0") it
// serves nothing.
func serveMetrics(o *RunOptions, srv *Server) (stop func(), err error) {
	ln := o.MetricsListener
	if ln == nil {
		if o.MetricsListen == "" || o.MetricsListen == "0" {
			return func() {}, nil
		}
		if ln, err = net.Listen("tcp", o.MetricsListen); err != nil {
			return nil, err
		}
	}
	hs := &http.Server{Handler: srv.MetricsHandler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			o.Log.Error("metrics server stopped", logging.KeyError, err.Error())
		}
	}()
	o.Log.Info("API metrics serving", "addr", ln.Addr().String())
	if o.MetricsReady != nil {
		o.MetricsReady(ln.Addr().String())
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
	}, nil
}
