package v1alpha1

import (
	"net/netip"
	"net/url"
	"slices"
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validate returns every problem of c, each with its field path. It is
// the one validation: the binaries refuse to start on any of them.
func Validate(c *Configuration) field.ErrorList {
	errs := append(ValidateValues(c), validateNoSecrets(c)...)
	// In path order, whatever the order maps were walked in.
	sort.SliceStable(errs, func(i, j int) bool { return errs[i].Field < errs[j].Field })
	return errs
}

// validateNoSecrets refuses passwords written in the file; the same URLs
// may come from the environment (ApplyEnv), which is why ValidateValues,
// run on the effective configuration, leaves them alone.
func validateNoSecrets(c *Configuration) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, noPassword(field.NewPath("store", "url"), c.Store.URL, "$BLOB_URL")...)
	errs = append(errs, noPassword(field.NewPath("fleet", "url"), c.Fleet.URL, "$FLEET_URL")...)
	errs = append(errs, noPassword(field.NewPath("fraud", "historyURL"), c.Fraud.HistoryURL, "$FRAUD_HISTORY_URL")...)
	errs = append(errs, noPassword(field.NewPath("people", "url"), c.People.URL, "$PEOPLE_URL")...)
	errs = append(errs, noPassword(field.NewPath("verification", "history", "url"), c.Verification.History.URL, "$HISTORY_URL")...)
	for i, u := range c.Verification.Proxies.URLs {
		errs = append(errs, noPassword(field.NewPath("verification", "proxies", "urls").Index(i), u, "$SMTP_PROXIES")...)
	}
	return errs
}

// ValidateValues is Validate without the check that the file holds no
// password: for the effective configuration, whose URLs may come from the
// environment.
func ValidateValues(c *Configuration) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateNamespaces(c.Namespaces, field.NewPath("namespaces"))...)
	errs = append(errs, oneOf(field.NewPath("logging", "level"), c.Logging.Level, "debug", "info", "warn", "error")...)
	errs = append(errs, oneOf(field.NewPath("logging", "format"), c.Logging.Format, "json", "text")...)
	errs = append(errs, positive(field.NewPath("store", "uploadSweepInterval"), c.Store.UploadSweepInterval)...)
	errs = append(errs, validateExecutor(c.Executor, field.NewPath("executor"))...)
	errs = append(errs, validatePipeline(c.Pipeline, field.NewPath("pipeline"))...)
	errs = append(errs, validateVerification(c.Verification, field.NewPath("verification"))...)
	errs = append(errs, positive(field.NewPath("fleet", "leaseTTL"), c.Fleet.LeaseTTL)...)
	errs = append(errs, positive(field.NewPath("fraud", "emailBudget"), c.Fraud.EmailBudget)...)
	errs = append(errs, validateAPI(c.API, field.NewPath("api"))...)
	errs = append(errs, cidrs(field.NewPath("manager", "sourceAllowCIDRs"), c.Manager.SourceAllowCIDRs)...)
	errs = append(errs, cidrs(field.NewPath("manager", "callbackAllowCIDRs"), c.Manager.CallbackAllowCIDRs)...)
	errs = append(errs, validateInstallation(c.Installation, field.NewPath("installation"))...)
	return errs
}

func validateNamespaces(n Namespaces, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for name, v := range map[string]string{"operator": n.Operator, "lists": n.Lists, "workers": n.Workers, "apiKeys": n.APIKeys} {
		if v != "" {
			errs = append(errs, dns1123(p.Child(name), v)...)
		}
	}
	for i, v := range n.Watch {
		errs = append(errs, dns1123(p.Child("watch").Index(i), v)...)
	}
	for ns := range n.StorePrefixes {
		errs = append(errs, dns1123(p.Child("storePrefixes").Key(ns), ns)...)
	}
	return errs
}

func validateExecutor(e Executor, p *field.Path) field.ErrorList {
	errs := oneOf(p.Child("mode"), e.Mode, "job", "local")
	errs = append(errs, atLeast(p.Child("maxConcurrentReconciles"), int64(e.MaxConcurrentReconciles), 1)...)
	j, jp := e.Jobs, p.Child("jobs")
	errs = append(errs, oneOf(jp.Child("imagePullPolicy"), string(j.ImagePullPolicy),
		string(corev1.PullAlways), string(corev1.PullIfNotPresent), string(corev1.PullNever))...)
	errs = append(errs, positiveQty(jp.Child("resources", "cpu"), j.Resources.CPU)...)
	errs = append(errs, positiveQty(jp.Child("resources", "memory"), j.Resources.Memory)...)
	if j.Resources.CPULimit.Sign() < 0 || !j.Resources.CPULimit.IsZero() && j.Resources.CPULimit.Cmp(j.Resources.CPU) < 0 {
		errs = append(errs, field.Invalid(jp.Child("resources", "cpuLimit"), j.Resources.CPULimit.String(), "must be zero (none) or at least resources.cpu"))
	}
	for i, t := range j.Tolerations {
		if t.Operator == corev1.TolerationOpExists && t.Value != "" {
			errs = append(errs, field.Invalid(jp.Child("tolerations").Index(i).Child("value"), t.Value, "must be empty with operator Exists"))
		}
	}
	errs = append(errs, atLeast(jp.Child("parallelism"), int64(j.Parallelism), 1)...)
	errs = append(errs, atLeast(jp.Child("backoffLimitPerIndex"), int64(j.BackoffLimitPerIndex), 0)...)
	errs = append(errs, atLeast(jp.Child("ttlAfterFinished"), int64(j.TTLAfterFinished.Duration), 0)...)
	errs = append(errs, positive(jp.Child("podStartGrace"), j.PodStartGrace)...)
	return errs
}

func validatePipeline(pl Pipeline, p *field.Path) field.ErrorList {
	errs := positiveQty(p.Child("shardBytes"), pl.ShardBytes)
	errs = append(errs, atLeast(p.Child("maxShards"), int64(pl.MaxShards), 1)...)
	errs = append(errs, oneOf(p.Child("shardBy"), pl.ShardBy, "domain", "rows")...)
	errs = append(errs, positiveQty(p.Child("distributeMemory"), pl.DistributeMemory)...)
	errs = append(errs, positiveQty(p.Child("dedupMemory"), pl.DedupMemory)...)
	errs = append(errs, positiveQty(p.Child("limits", "maxExpandedBytes"), pl.Limits.MaxExpandedBytes)...)
	errs = append(errs, positiveQty(p.Child("limits", "maxRecordBytes"), pl.Limits.MaxRecordBytes)...)
	if pl.Limits.MaxExpansionRatio == 0 {
		errs = append(errs, field.Invalid(p.Child("limits", "maxExpansionRatio"), 0, "must be positive, or negative for no cap"))
	}
	return errs
}

func validateVerification(v Verification, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s := v.DNS.Server; s != "system" && s != "off" {
		if _, err := netip.ParseAddrPort(s); err != nil {
			errs = append(errs, field.Invalid(p.Child("dns", "server"), s, `must be "system", "off" or an IP address with port`))
		}
	}
	errs = append(errs, positive(p.Child("dns", "timeout"), v.DNS.Timeout)...)
	errs = append(errs, atLeast(p.Child("dns", "workers"), int64(v.DNS.Workers), 1)...)
	errs = append(errs, validateSMTP(v.SMTP, p.Child("smtp"))...)
	ip := p.Child("interactive")
	for name, d := range map[string]metav1.Duration{"connectTimeout": v.Interactive.ConnectTimeout,
		"greetingTimeout": v.Interactive.GreetingTimeout, "commandTimeout": v.Interactive.CommandTimeout} {
		errs = append(errs, positive(ip.Child(name), d)...)
	}
	for i, u := range v.Proxies.URLs {
		pp := p.Child("proxies", "urls").Index(i)
		if pu, err := url.Parse(u); err != nil || pu.Scheme != "socks5" || pu.Host == "" {
			errs = append(errs, field.Invalid(pp, u, "must be socks5://host:port"))
		}
	}
	errs = append(errs, atLeast(p.Child("proxies", "maxConnsPerProxy"), int64(v.Proxies.MaxConnsPerProxy), 1)...)
	errs = append(errs, atLeast(p.Child("rowsInFlight"), int64(v.RowsInFlight), 1)...)
	hp := p.Child("history")
	errs = append(errs, oneOf(hp.Child("scope"), v.History.Scope, "tenant", "shared")...)
	for name, d := range map[string]metav1.Duration{"deliverable": v.History.TTLs.Deliverable, "undeliverable": v.History.TTLs.Undeliverable,
		"catchAll": v.History.TTLs.CatchAll, "unverified": v.History.TTLs.Unverified} {
		errs = append(errs, atLeast(hp.Child("ttls", name), int64(d.Duration), 0)...)
	}
	errs = append(errs, positive(hp.Child("keyCheckInterval"), v.History.KeyCheckInterval)...)
	return errs
}

func validateSMTP(s SMTP, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.Port < 1 || s.Port > 65535 {
		errs = append(errs, field.Invalid(p.Child("port"), s.Port, "must be a TCP port"))
	}
	if s.HELOName == "" {
		errs = append(errs, field.Required(p.Child("heloName"), "mail servers refuse an empty EHLO"))
	}
	for name, n := range map[string]int{"maxConnsPerHost": s.MaxConnsPerHost, "maxSessions": s.MaxSessions,
		"maxRcptPerTransaction": s.MaxRcptPerTransaction, "maxRcptPerSession": s.MaxRcptPerSession, "pipelineDepth": s.PipelineDepth,
		"maxRefusals": s.MaxRefusals} {
		errs = append(errs, atLeast(p.Child(name), int64(n), 1)...)
	}
	if s.MaxRcptPerSession < s.MaxRcptPerTransaction {
		errs = append(errs, field.Invalid(p.Child("maxRcptPerSession"), s.MaxRcptPerSession, "must be at least maxRcptPerTransaction"))
	}
	if s.MaxRejectsPerSession < -1 || s.MaxRejectsPerSession == 0 {
		errs = append(errs, field.Invalid(p.Child("maxRejectsPerSession"), s.MaxRejectsPerSession, "must be positive, or -1 for no limit"))
	}
	if s.RatePerHost <= 0 {
		errs = append(errs, field.Invalid(p.Child("ratePerHost"), s.RatePerHost, "must be positive"))
	}
	for name, d := range map[string]metav1.Duration{"refusalBackoff": s.RefusalBackoff, "connectTimeout": s.ConnectTimeout,
		"greetingTimeout": s.GreetingTimeout, "commandTimeout": s.CommandTimeout, "greylistRetry": s.GreylistRetry,
		"hostMemoryTTL": s.HostMemoryTTL} {
		errs = append(errs, positive(p.Child(name), d)...)
	}
	return append(errs, cidrs(p.Child("allowCIDRs"), s.AllowCIDRs)...)
}

func validateAPI(a API, p *field.Path) field.ErrorList {
	errs := positiveQty(p.Child("maxUploadSize"), a.MaxUploadSize)
	errs = append(errs, positiveQty(p.Child("feedbackMaxSize"), a.FeedbackMaxSize)...)
	errs = append(errs, atLeast(p.Child("feedbackFiles"), int64(a.FeedbackFiles), 1)...)
	errs = append(errs, atLeast(p.Child("feedbackFilesPerTenant"), int64(a.FeedbackFilesPerTenant), 1)...)
	if a.RateLimit.PerSecond <= 0 {
		errs = append(errs, field.Invalid(p.Child("rateLimit", "perSecond"), a.RateLimit.PerSecond, "must be positive"))
	}
	errs = append(errs, atLeast(p.Child("rateLimit", "burst"), int64(a.RateLimit.Burst), 1)...)
	errs = append(errs, atLeast(p.Child("shutdownTimeout"), int64(a.ShutdownTimeout.Duration), 0)...)
	errs = append(errs, atLeast(p.Child("drainDelay"), int64(a.DrainDelay.Duration), 0)...)
	errs = append(errs, positive(p.Child("throttle", "bodyStall"), a.Throttle.BodyStall)...)
	errs = append(errs, atLeast(p.Child("throttle", "trackedAddresses"), int64(a.Throttle.TrackedAddresses), 1)...)
	return append(errs, cidrs(p.Child("throttle", "trustedProxies"), a.Throttle.TrustedProxies)...)
}

// installationSecretKinds are the kinds installation.secrets may name.
var installationSecretKinds = []string{"list-id-key", "callback-signing", "history-key", "fraud-history-key"}

func validateInstallation(in Installation, p *field.Path) field.ErrorList {
	errs := dns1123Subdomain(p.Child("listIDConfigMap"), in.ListIDConfigMap)
	for k, name := range in.Secrets {
		errs = append(errs, oneOf(p.Child("secrets").Key(k), k, installationSecretKinds...)...)
		errs = append(errs, dns1123Subdomain(p.Child("secrets").Key(k), name)...)
	}
	for i, k := range in.ExternalSecrets {
		errs = append(errs, oneOf(p.Child("externalSecrets").Index(i), k, installationSecretKinds...)...)
	}
	return errs
}

func oneOf(p *field.Path, v string, allowed ...string) field.ErrorList {
	if slices.Contains(allowed, v) {
		return nil
	}
	return field.ErrorList{field.NotSupported(p, v, allowed)}
}

func atLeast(p *field.Path, v, least int64) field.ErrorList {
	if v >= least {
		return nil
	}
	return field.ErrorList{field.Invalid(p, v, "must be at least "+itoa(least))}
}

func positive(p *field.Path, d metav1.Duration) field.ErrorList {
	if d.Duration > 0 {
		return nil
	}
	return field.ErrorList{field.Invalid(p, d.Duration.String(), "must be positive")}
}

func positiveQty(p *field.Path, q resource.Quantity) field.ErrorList {
	if q.Sign() > 0 {
		return nil
	}
	return field.ErrorList{field.Invalid(p, q.String(), "must be positive")}
}

func cidrs(p *field.Path, vs []string) field.ErrorList {
	var errs field.ErrorList
	for i, v := range vs {
		if _, err := netip.ParsePrefix(v); err != nil {
			errs = append(errs, field.Invalid(p.Index(i), v, "must be a CIDR such as 10.0.0.0/8"))
		}
	}
	return errs
}

func dns1123(p *field.Path, v string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(v) {
		errs = append(errs, field.Invalid(p, v, msg))
	}
	return errs
}

func dns1123Subdomain(p *field.Path, v string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(v) {
		errs = append(errs, field.Invalid(p, v, msg))
	}
	return errs
}

// noPassword refuses a URL written with a password: the file is not a
// Secret. env names where such a URL goes instead.
func noPassword(p *field.Path, raw, env string) field.ErrorList {
	if !HasPassword(raw) {
		return nil
	}
	return field.ErrorList{field.Forbidden(p, "a URL with a password belongs in a Secret: give it as "+env+" (the file is not a Secret)")}
}

// HasPassword reports whether the URL raw carries a password.
func HasPassword(raw string) bool {
	if raw == "" {
		return false
	}
	u, err := url.Parse(raw)
	if err != nil {
		return slices.Contains([]byte(raw), '@') // unparseable: err on the safe side
	}
	_, ok := u.User.Password()
	return ok
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
