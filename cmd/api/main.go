// Command api serves the REST companion API in-cluster: the /v5/list
// endpoints, with API keys read from Secrets, plus /healthz, /readyz,
// /openapi.json, and /metrics on a port of its own (--metrics-bind-address).
package main

import (
	"context"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"

	ctrl "sigs.k8s.io/controller-runtime"

	cfgv1 "github.com/emaildata/emaildata/api/config/v1alpha1"
	"github.com/emaildata/emaildata/internal/lists/callback"
	"github.com/emaildata/emaildata/internal/platform/logging"
	"github.com/emaildata/emaildata/internal/refdata/people"
	"github.com/emaildata/emaildata/internal/restapi"
	"github.com/emaildata/emaildata/internal/wiring"
)

func main() {
	// The --config file holds every setting; the few flags are what
	// differs per process (docs/configuration.md).
	flag.String("config", "", "configuration file (kind Configuration, config.emaildata.io/v1alpha1; see docs/configuration.md)")
	printConfig := flag.Bool("print-config", false, "print the effective configuration (the --config file and its defaults; secrets redacted) and exit")
	conf, cerr := wiring.LoadConfig(wiring.ConfigPath(os.Args[1:]))
	if cerr != nil {
		fmt.Fprintln(os.Stderr, "configuration:", cerr)
		os.Exit(2)
	}
	f := bindAll(flag.CommandLine, conf)
	o, vc, fc, lo := &f.o, &f.vc, &f.fc, &f.lo
	flag.Parse()
	cidrs, peopleURL := f.cidrs, f.peopleURL
	f.parsed()
	if *printConfig {
		os.Exit(wiring.PrintConfig(os.Stdout, conf, flag.CommandLine))
	}

	log, err := logging.New(os.Stderr, *lo)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctrl.SetLogger(logging.Logr(log)) // the client's own logs, in the same stream
	o.Log = log
	policy, err := callback.ParsePolicy(cidrs)
	if err != nil {
		log.Error("bad manager.callbackAllowCIDRs", logging.KeyError, err.Error())
		os.Exit(2)
	}
	o.CallbackPolicy = policy

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg := ctrl.GetConfigOrDie()
	// The history keys, from their installation secrets (by name; the
	// first API pod of an install waits here for the manager to make them).
	if err := restapi.LoadInstallationKeys(ctx, cfg, *o, vc, fc); err != nil {
		log.Error("installation secrets", logging.KeyError, err.Error())
		os.Exit(2)
	}
	vc.Log = log
	engine, err := wiring.NewEngine(ctx, *vc)
	if err != nil {
		log.Error("verification engine", logging.KeyError, err.Error())
		os.Exit(2)
	}
	o.Verifier, o.EVSMTP = engine, vc.SMTP
	o.HistoryHealth = wiring.HistoryHealth(engine)
	if peopleURL != "" {
		if o.People, err = people.Open(ctx, peopleURL); err != nil {
			log.Error("people store", logging.KeyError, err.Error())
			os.Exit(2)
		}
		defer o.People.Close()
	}
	fc.Fleet, fc.Log = wiring.FleetOf(engine), log
	if o.Fraud, err = wiring.NewFraud(ctx, *fc, o.People); err != nil {
		log.Error("fraud scorer", logging.KeyError, err.Error())
		os.Exit(2)
	}
	o.FraudBudget, o.FraudSMTP = fc.Budget, fc.SMTP && vc.SMTP
	if err := restapi.Run(ctx, cfg, *o); err != nil {
		log.Error("api stopped", logging.KeyError, err.Error())
		os.Exit(1)
	}
}

// apiFlags are the API's flags, bound with the configuration's values as
// defaults.
type apiFlags struct {
	o                restapi.RunOptions
	vc               wiring.VerifyConfig
	fc               wiring.FraudConfig
	lo               logging.Options
	cidrs, peopleURL string
	console          bool
}

// parsed sets the options the flags and the file give indirectly, once
// the flags are parsed.
func (f *apiFlags) parsed() { f.o.ConsoleDisabled = !f.console }

// bindAll binds the API's flags on fs: only what differs per process
// (addresses, logging; controller-runtime adds --kubeconfig) and the
// names of the installation's objects, which the manager and the API
// take alike per release (the file's installation section, overridden).
// Every setting is the --config file's (docs/configuration.md; the
// migration table there names each former flag's field).
func bindAll(fs *flag.FlagSet, conf *cfgv1.Configuration) *apiFlags {
	f := &apiFlags{o: fromConfig(conf), vc: wiring.APIVerifyFrom(conf), fc: wiring.FraudFrom(conf)}
	f.cidrs = strings.Join(conf.Manager.CallbackAllowCIDRs, ",")
	f.console, f.peopleURL = conf.API.Console.Enabled, conf.People.URL
	f.lo.BindFlags(fs, wiring.LoggingFrom(conf))
	fs.StringVar(&f.o.Listen, "listen", ":8090", "address to serve on")
	fs.StringVar(&f.o.MetricsListen, "metrics-bind-address", ":8091", "address of GET /metrics, apart from the public one (0 disables)")
	fs.StringVar(&f.o.ListIDConfigMap, "list-id-configmap", f.o.ListIDConfigMap, "the list ID counter ConfigMap in the operator's namespace (the manager's flag of the same name)")
	f.o.Secrets.BindFlags(fs) // the manager's flags of the same names: one setting
	return f
}

// fromConfig is the API's options as the configuration sets them; the
// flags bound next start from these values.
func fromConfig(c *cfgv1.Configuration) restapi.RunOptions {
	var o restapi.RunOptions
	a := c.API
	o.KeyNamespace, o.APIKeyNamespace, o.Namespace = c.Namespaces.Operator, c.Namespaces.APIKeys, c.Namespaces.Lists
	o.ListIDConfigMap, o.Secrets, o.BlobURL = c.Installation.ListIDConfigMap, wiring.SecretsFrom(c), c.Store.URL
	o.MaxUploadBytes, o.FeedbackMaxBytes, o.Limits = a.MaxUploadSize.Value(), a.FeedbackMaxSize.Value(), wiring.LimitsFrom(c)
	o.RateLimit, o.Burst = a.RateLimit.PerSecond, a.RateLimit.Burst
	o.ShutdownTimeout, o.DrainDelay = a.ShutdownTimeout.Duration, a.DrainDelay.Duration
	o.FeedbackFiles, o.FeedbackFilesPerTenant = a.FeedbackFiles, a.FeedbackFilesPerTenant
	t := a.Throttle
	o.Throttle = restapi.ThrottleConfig{BodyMinRate: t.BodyMinRate, BodyStall: t.BodyStall.Duration,
		UploadsPerKey: t.UploadsPerKey, UploadsPerTenant: t.UploadsPerTenant,
		AuthFailureRate: t.AuthFailureRate, AuthFailureBurst: t.AuthFailureBurst,
		ForbiddenRate: t.ForbiddenRate, ForbiddenBurst: t.ForbiddenBurst, TrackedAddresses: t.TrackedAddresses}
	for _, p := range t.TrustedProxies {
		o.Throttle.TrustedProxies = append(o.Throttle.TrustedProxies, netip.MustParsePrefix(p)) // Validate checked them
	}
	return o
}
