// Command api serves the REST companion API in-cluster: the /v5/list
// endpoints, with API keys read from Secrets, plus /healthz, /readyz,
// /openapi.json, and /metrics on a port of its own (--metrics-bind-address).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/emaildata/emaildata/internal/lists/callback"
	"github.com/emaildata/emaildata/internal/lists/listfile"
	"github.com/emaildata/emaildata/internal/lists/listid"
	"github.com/emaildata/emaildata/internal/platform/logging"
	"github.com/emaildata/emaildata/internal/refdata/people"
	"github.com/emaildata/emaildata/internal/restapi"
	"github.com/emaildata/emaildata/internal/wiring"
)

func main() {
	var o restapi.RunOptions
	var cidrs string
	var debug bool
	var lo logging.Options
	lo.BindFlags(flag.CommandLine, logging.Options{Level: slog.LevelInfo, Format: logging.FormatJSON})
	o.Limits = listfile.DefaultLimits()
	flag.StringVar(&o.Listen, "listen", ":8090", "address to serve on")
	flag.StringVar(&o.MetricsListen, "metrics-bind-address", ":8091", "address of GET /metrics, apart from the public one (0 disables)")
	flag.StringVar(&o.KeyNamespace, "namespace", envOr("POD_NAMESPACE", listid.DefaultNamespace), "the operator's namespace: it holds the list ID counter, the installation secrets and (unless --api-key-namespace) the API key Secrets")
	flag.StringVar(&o.APIKeyNamespace, "api-key-namespace", "", "namespace of the API key Secrets (default --namespace); one holding nothing else keeps other Secrets out of the API's reach")
	flag.StringVar(&o.ListIDConfigMap, "list-id-configmap", listid.DefaultConfigMap, "the list ID counter ConfigMap in --namespace (the manager's flag of the same name)")
	o.Secrets.BindFlags(flag.CommandLine)
	flag.StringVar(&o.Namespace, "lists-namespace", "", "namespace of API-submitted lists (default: --namespace)")
	flag.StringVar(&o.BlobURL, "blob-url", envOr("BLOB_URL", "file:///var/lib/emaildata/store"), "blob store URL")
	flag.Int64Var(&o.MaxUploadBytes, "max-upload-bytes", 1<<30, "largest accepted list file")
	flag.Int64Var(&o.FeedbackMaxBytes, "max-feedback-bytes", restapi.DefaultFeedbackMaxBytes, "largest accepted fraud feedback file (POST /feedback/v1)")
	o.Limits.BindFlags(flag.CommandLine) // the manager's flags of the same names: one setting
	flag.Float64Var(&o.RateLimit, "rate-limit", 50, "requests per second per API key (a key's Secret may override)")
	flag.IntVar(&o.Burst, "rate-burst", 100, "burst per API key")
	flag.StringVar(&cidrs, "callback-allow-cidrs", "", "private ranges callback_url may point at, comma separated")
	flag.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", 45*time.Second, "how long in-flight uploads may drain on stop")
	flag.DurationVar(&o.DrainDelay, "drain-delay", 5*time.Second, "how long to keep serving, not ready, before draining")
	flag.BoolVar(&debug, "debug", false, "log every request (no personal data)")
	console := flag.Bool("console", true, "serve the web console at /console/ (docs/console.md)")
	o.Throttle = restapi.DefaultThrottle()
	o.Throttle.BindFlags(flag.CommandLine)
	flag.IntVar(&o.FeedbackFiles, "feedback-files", restapi.DefaultFeedbackFiles, "fraud feedback files recorded at once (each holds a store transaction while it arrives); beyond, 429")
	flag.IntVar(&o.FeedbackFilesPerTenant, "feedback-files-per-tenant", restapi.DefaultFeedbackFilesPerTenant, "fraud feedback files one tenant may have recorded at once; beyond, 429")
	vc := wiring.DefaultAPIVerifyConfig()
	vc.BindFlags(flag.CommandLine)
	fc := wiring.DefaultFraudConfig()
	fc.BindFlags(flag.CommandLine)
	peopleURL := flag.String("people-url", os.Getenv("PEOPLE_URL"), "reference people store (bolt:///path.db or postgres://...); enables POST /v5/ei/bulk")
	flag.Parse()

	o.ConsoleDisabled = !*console
	if debug {
		lo.Level = slog.LevelDebug
	}
	log, err := logging.New(os.Stderr, lo)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctrl.SetLogger(logging.Logr(log)) // the client's own logs, in the same stream
	o.Log = log
	policy, err := callback.ParsePolicy(cidrs)
	if err != nil {
		log.Error("bad --callback-allow-cidrs", logging.KeyError, err.Error())
		os.Exit(2)
	}
	o.CallbackPolicy = policy

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg := ctrl.GetConfigOrDie()
	// The history keys, from their installation secrets (by name; the
	// first API pod of an install waits here for the manager to make them).
	if err := restapi.LoadInstallationKeys(ctx, cfg, o, &vc, &fc); err != nil {
		log.Error("installation secrets", logging.KeyError, err.Error())
		os.Exit(2)
	}
	vc.Log = log
	engine, err := wiring.NewEngine(ctx, vc)
	if err != nil {
		log.Error("verification engine", logging.KeyError, err.Error())
		os.Exit(2)
	}
	o.Verifier, o.EVSMTP = engine, vc.SMTP
	o.HistoryHealth = wiring.HistoryHealth(engine)
	if *peopleURL != "" {
		if o.People, err = people.Open(ctx, *peopleURL); err != nil {
			log.Error("people store", logging.KeyError, err.Error())
			os.Exit(2)
		}
		defer o.People.Close()
	}
	fc.Fleet, fc.Log = wiring.FleetOf(engine), log
	if o.Fraud, err = wiring.NewFraud(ctx, fc, o.People); err != nil {
		log.Error("fraud scorer", logging.KeyError, err.Error())
		os.Exit(2)
	}
	o.FraudBudget, o.FraudSMTP = fc.Budget, fc.SMTP && vc.SMTP
	if err := restapi.Run(ctx, cfg, o); err != nil {
		log.Error("api stopped", logging.KeyError, err.Error())
		os.Exit(1)
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
