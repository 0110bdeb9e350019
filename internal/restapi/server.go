// Package restapi serves the companion REST API: the /v5/list endpoints,
// with API keys enabled per service and tenant isolation, and the
// single-call endpoints (/v5/ev, /fr, /v5/ei/bulk, /v5/td, /v5/eppend,
// /ae, /pv, /feedback/v1).
package restapi

import (
	"context"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/lists/callback"
	"github.com/emaildata/emaildata/internal/lists/listfile"
	"github.com/emaildata/emaildata/internal/lists/listid"
	"github.com/emaildata/emaildata/internal/platform/apikey"
	"github.com/emaildata/emaildata/internal/platform/logging"
	"github.com/emaildata/emaildata/internal/platform/metrics"
	"github.com/emaildata/emaildata/internal/platform/services"
	"github.com/emaildata/emaildata/internal/refdata/fraud"
	"github.com/emaildata/emaildata/internal/refdata/people"
	"github.com/emaildata/emaildata/internal/restapi/console"
)

// Config holds the server's settings.
type Config struct {
	// Namespace where API-submitted lists are created.
	Namespace string
	// MaxUploadBytes bounds one uploaded list file.
	MaxUploadBytes int64
	// Limits applied when checking an uploaded zip.
	Limits listfile.Limits
	// RateLimit is the default requests/second per key; Burst its burst.
	RateLimit float64
	Burst     int
	// CallbackPolicy validates callback_url at submission.
	CallbackPolicy callback.Policy
	// CallbackSigningNamespace and CallbackSigningSecret name the Secret
	// holding the installation's callback signing key, from which
	// GET /v5/callback/secret derives the caller's tenant's key (RunOptions:
	// the operator's namespace and installsecret.CallbackSigning's name by
	// default).
	CallbackSigningNamespace, CallbackSigningSecret string
	// PurchaseWait bounds how long a purchase waits for the list to settle.
	PurchaseWait time.Duration
	// Verifier serves GET /v5/ev; the route exists only when it is set.
	Verifier Verifier
	// EVSMTP enables the SMTP mailbox check on GET /v5/ev (callers may
	// turn it off per call with smtp=false).
	EVSMTP bool
	// Fraud serves GET /fr (with Verifier); the route exists only when set.
	Fraud *fraud.Scorer
	// FraudBudget bounds the email check of GET /fr; FraudSMTP adds the
	// mailbox check to it.
	FraudBudget time.Duration
	FraudSMTP   bool
	// People serves POST /v5/ei/bulk; the route exists only when set.
	People people.Store
	// FeedbackMaxBytes bounds the file of POST /feedback/v1
	// (DefaultFeedbackMaxBytes when 0).
	FeedbackMaxBytes int64
	// Throttle bounds what one client address, key or tenant can take of
	// the connections and the key checks (DefaultThrottle for zero fields).
	Throttle ThrottleConfig
	// Now is the clock of the failure counts (time.Now when nil). Read
	// deadlines are the connection's, always on the wall clock.
	Now func() time.Time
	// FeedbackFiles bounds the feedback files this process records at
	// once, FeedbackFilesPerTenant those of one tenant (defaults
	// DefaultFeedbackFiles and DefaultFeedbackFilesPerTenant): each holds
	// a store transaction while its client sends it; beyond, 429.
	FeedbackFiles          int
	FeedbackFilesPerTenant int
	// HistoryHealth, when set, says whether the verifier's verification
	// history is in use, and why not (wiring.HistoryHealth): GET /readyz
	// says so, still ready (the API answers, probing every address).
	HistoryHealth func() (ok bool, detail string)
	// ConsoleDisabled turns off the web console, served at /console/ by
	// default (docs/console.md): its files only, with no key, no state and
	// no route beyond the public API's; an installation that wants no
	// browser-facing pages turns it off (the API's --console=false).
	ConsoleDisabled bool
}

// Server is the REST API.
type Server struct {
	cfg      Config
	keys     *apikey.Store
	client   client.Client // reads from the informer cache, writes to the API server
	live     client.Reader // reads from the API server, on cache misses
	verifier Verifier
	store    *blobstore.Store
	ids      *listid.Allocator
	log      *slog.Logger
	metrics  *metrics.API

	// feedback bounds the feedback files recorded at once.
	feedback *feedbackSlots

	// notReady reports draining, when set.
	notReady func() bool

	limMu sync.Mutex
	// limiters holds one limiter per key Secret, by name (Run caches key
	// Secrets of one namespace). Keyed by Secret rather than by *apikey.Key:
	// every Secret update or informer resync yields a new *Key, and a map by
	// pointer would grow with each and reset the key's limit.
	limiters map[string]*keyLimiter

	// authFailures counts failed key checks by client address; forbidden,
	// calls refused with 403 by tenant; uploads, bodies in flight by key
	// and tenant (ThrottleConfig).
	authFailures *failures[netip.Addr]
	forbidden    *failures[string]
	uploads      *uploads

	// routes are the patterns Handler registered (tests walk them).
	routes []string
}

type keyLimiter struct {
	key *apikey.Key // the version of the key the limits come from
	lim *rate.Limiter
}

// New returns a server. c should read from an informer cache that indexes
// EmailLists by ListIDIndex.
func New(cfg Config, keys *apikey.Store, c client.Client, live client.Reader, store *blobstore.Store, ids *listid.Allocator, log *slog.Logger) *Server {
	if cfg.MaxUploadBytes <= 0 {
		cfg.MaxUploadBytes = 1 << 30
	}
	if cfg.RateLimit <= 0 {
		cfg.RateLimit = 50
	}
	if cfg.Burst <= 0 {
		cfg.Burst = int(cfg.RateLimit * 2)
	}
	if cfg.PurchaseWait <= 0 {
		cfg.PurchaseWait = 10 * time.Second
	}
	if log == nil {
		log = slog.Default()
	}
	if cfg.FeedbackFiles <= 0 {
		cfg.FeedbackFiles = DefaultFeedbackFiles
	}
	if cfg.FeedbackFilesPerTenant <= 0 {
		cfg.FeedbackFilesPerTenant = DefaultFeedbackFilesPerTenant
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	t := cfg.Throttle.withDefaults()
	cfg.Throttle = t
	s := &Server{
		cfg: cfg, keys: keys, client: c, live: live, store: store, ids: ids, log: log, verifier: cfg.Verifier,
		metrics:      metrics.NewAPI(),
		limiters:     map[string]*keyLimiter{},
		authFailures: newFailures[netip.Addr](t.AuthFailureRate, t.AuthFailureBurst, t.TrackedAddresses, cfg.Now),
		forbidden:    newFailures[string](t.ForbiddenRate, t.ForbiddenBurst, t.TrackedAddresses, cfg.Now),
		uploads:      newUploads(t.UploadsPerKey, t.UploadsPerTenant),
		feedback:     &feedbackSlots{max: cfg.FeedbackFiles, perTenant: cfg.FeedbackFilesPerTenant, tenants: map[string]int{}},
	}
	s.exportEngine()
	return s
}

// Handler returns the HTTP handler with every route.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	s.routes = nil
	route := func(pattern string, h http.HandlerFunc) {
		mux.Handle(pattern, s.instrument(pattern, h))
		s.routes = append(s.routes, pattern)
	}
	route("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { writeText(w, http.StatusOK, "ok") })
	route("GET /readyz", s.readyz)
	// GET /metrics is served on its own port (MetricsHandler), never here.
	route("GET /openapi.json", serveOpenAPI)

	route("POST /v5/list", s.listKey(s.listService, s.submitList))
	// Every call on one list goes through listCall (key, tenant, service).
	route("GET /v5/list/{list_id}", s.listCall(listNotFound, s.listStatus))
	route("POST /v5/list/{list_id}/purchase", s.listCall(listNotFound, s.purchase))
	route("GET /v5/list/{list_id}/results", s.listCall(resultsNotFound, s.serveResult))
	route("GET /v5/callback/secret", s.listKey(anyListService, s.callbackSecret))
	// The tenant's list index and the key's services (the console's
	// needs; any valid key: each answers only within the key's rights).
	route("GET /v5/lists", s.listKey(nil, s.listIndex))
	route("GET /v5/key", s.listKey(nil, s.keyServices))
	if s.cfg.People != nil {
		route("POST /v5/ei/bulk", s.bulkKey(s.bulkAppend))
		route("GET /v5/td", s.textKey(services.Demographics, hasIdentifier, tdQuery, s.singleDemographics))
		route("GET /v5/eppend", s.textKey(services.EmailAppend, hasIdentifier, parseQuery, s.emailPostalAppend))
		route("GET /ae", s.textKey(services.EmailAppend, hasEmailIdentifier, parseQuery, s.alternateEmails))
	}
	// Phone verification needs no store; the phone status reference data
	// of a people store adds to it.
	route("GET /pv", s.textKey(services.Fraud, hasPhone, parseQuery, s.verifyPhone))
	if s.cfg.Fraud != nil {
		route("POST /feedback/v1", s.feedbackKey(s.fraudFeedback))
		route("GET /feedback/v1/reports", s.textKey(services.Fraud, anyParams, parseQuery, s.listReports))
		route("DELETE /feedback/v1/reports", s.textKey(services.Fraud, anyParams, parseQuery, s.withdrawReports))
	}
	if s.verifier != nil {
		route("GET /v5/ev", s.queryKey(services.EmailValidation, s.verifyEmail))
		if s.cfg.Fraud != nil {
			route("GET /fr", s.queryKey(services.Fraud, s.fraudCheck))
		}
	}
	s.serveConsole(mux)
	return s.bodies(s.requestID(s.recoverer(s.dispatch(mux))))
}

// serveConsole routes the web console's files unless it is disabled. Not
// in s.routes: they take no key, and the route tests walk keyed routes.
func (s *Server) serveConsole(mux *http.ServeMux) {
	if s.cfg.ConsoleDisabled {
		return
	}
	ch, err := console.New()
	if err != nil { // the embedded files are the binary's own: a build fault
		s.log.Error("web console not served", logging.KeyError, err.Error())
		return
	}
	mux.Handle("GET "+console.Prefix, s.instrument("GET "+console.Prefix, ch))
	mux.Handle("GET /console", s.instrument("GET /console", http.RedirectHandler(console.Prefix, http.StatusMovedPermanently)))
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if s.notReady != nil && s.notReady() {
		writeText(w, http.StatusServiceUnavailable, "draining")
		return
	}
	var notes []string
	if s.keys.Len() == 0 {
		// Not fatal: a cluster may have no keys yet; report it for operators.
		notes = append(notes, "no API keys configured")
	}
	if s.cfg.HistoryHealth != nil {
		if ok, detail := s.cfg.HistoryHealth(); !ok {
			// Not fatal either: without the history every address is
			// probed; failing readiness would stop every replica at once.
			notes = append(notes, "verification history not in use: "+detail)
		}
	}
	if len(notes) > 0 {
		writeText(w, http.StatusOK, "ok ("+strings.Join(notes, "; ")+")")
		return
	}
	writeText(w, http.StatusOK, "ok")
}

// limiter returns the key's rate limiter.
func (s *Server) limiter(k *apikey.Key) *rate.Limiter {
	s.limMu.Lock()
	defer s.limMu.Unlock()
	r, b := s.cfg.RateLimit, s.cfg.Burst
	if k.RateLimit > 0 {
		r, b = k.RateLimit, max(1, int(k.RateLimit*2))
	}
	e, ok := s.limiters[k.Secret]
	switch {
	case !ok:
		e = &keyLimiter{key: k, lim: rate.NewLimiter(rate.Limit(r), b)}
		s.limiters[k.Secret] = e
	case e.key != k:
		// The Secret changed or was resynced: keep the state, apply its limits.
		e.key = k
		e.lim.SetLimit(rate.Limit(r))
		e.lim.SetBurst(b)
	}
	return e.lim
}

// ctxKey keys request-scoped values.
type ctxKey int

const (
	keyCtx ctxKey = iota
	requestIDCtx
)

func keyFrom(ctx context.Context) *apikey.Key {
	c, _ := ctx.Value(keyCtx).(caller)
	return c.key
}

// serviceFrom returns the list service a submission's key was authorized for.
func serviceFrom(ctx context.Context) string {
	c, _ := ctx.Value(keyCtx).(caller)
	return c.service
}
