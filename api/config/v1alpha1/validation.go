package v1alpha1

import (
	"net"
	"net/netip"
	"net/url"
	"slices"
	"sort"
	"strconv"
)

// Validate returns every problem of c, each with its field path. It is
// the one validation: the binaries refuse to start on any of them.
func Validate(c *Configuration) ErrorList {
	errs := append(ValidateValues(c), validateNoSecrets(c)...)
	// In path order, whatever the order maps were walked in.
	sort.SliceStable(errs, func(i, j int) bool { return errs[i].Field < errs[j].Field })
	return errs
}

// validateNoSecrets refuses passwords written in the file; the same URLs
// may come from the environment (ApplyEnv), which is why ValidateValues,
// run on the effective configuration, leaves them alone.
func validateNoSecrets(c *Configuration) ErrorList {
	var errs ErrorList
	errs = append(errs, noPassword(newPath("store", "url"), c.Store.URL, "$BLOB_URL")...)
	errs = append(errs, noPassword(newPath("fleet", "url"), c.Fleet.URL, "$FLEET_URL")...)
	errs = append(errs, noPassword(newPath("fraud", "historyURL"), c.Fraud.HistoryURL, "$FRAUD_HISTORY_URL")...)
	errs = append(errs, noPassword(newPath("people", "url"), c.People.URL, "$PEOPLE_URL")...)
	errs = append(errs, noPassword(newPath("verification", "history", "url"), c.Verification.History.URL, "$HISTORY_URL")...)
	for i, u := range c.Verification.Proxies.URLs {
		errs = append(errs, noPassword(newPath("verification", "proxies", "urls").index(i), u, "$SMTP_PROXIES")...)
	}
	return errs
}

// ValidateValues is Validate without the check that the file holds no
// password: for the effective configuration, whose URLs may come from the
// environment.
func ValidateValues(c *Configuration) ErrorList {
	var errs ErrorList
	errs = append(errs, validateNamespaces(c.Namespaces, newPath("namespaces"))...)
	errs = append(errs, oneOf(newPath("logging", "level"), c.Logging.Level, "debug", "info", "warn", "error")...)
	errs = append(errs, oneOf(newPath("logging", "format"), c.Logging.Format, "json", "text")...)
	errs = append(errs, positive(newPath("store", "uploadSweepInterval"), c.Store.UploadSweepInterval)...)
	errs = append(errs, validateExecutor(c.Executor, newPath("executor"))...)
	errs = append(errs, validatePipeline(c.Pipeline, newPath("pipeline"))...)
	errs = append(errs, validateVerification(c.Verification, newPath("verification"))...)
	errs = append(errs, positive(newPath("fleet", "leaseTTL"), c.Fleet.LeaseTTL)...)
	errs = append(errs, positive(newPath("fraud", "emailBudget"), c.Fraud.EmailBudget)...)
	errs = append(errs, validateAPI(c.API, newPath("api"))...)
	errs = append(errs, cidrs(newPath("manager", "sourceAllowCIDRs"), c.Manager.SourceAllowCIDRs)...)
	errs = append(errs, cidrs(newPath("manager", "callbackAllowCIDRs"), c.Manager.CallbackAllowCIDRs)...)
	errs = append(errs, validateInstallation(c.Installation, newPath("installation"))...)
	return errs
}

func validateNamespaces(n Namespaces, p path) ErrorList {
	var errs ErrorList
	for name, v := range map[string]string{"operator": n.Operator, "lists": n.Lists, "workers": n.Workers, "apiKeys": n.APIKeys} {
		if v != "" {
			errs = append(errs, dns1123(p.child(name), v)...)
		}
	}
	for i, v := range n.Watch {
		errs = append(errs, dns1123(p.child("watch").index(i), v)...)
	}
	for ns := range n.StorePrefixes {
		errs = append(errs, dns1123(p.child("storePrefixes").key(ns), ns)...)
	}
	return errs
}

func validateExecutor(e Executor, p path) ErrorList {
	errs := oneOf(p.child("mode"), e.Mode, "job", "local")
	errs = append(errs, atLeast(p.child("maxConcurrentReconciles"), int64(e.MaxConcurrentReconciles), 1)...)
	j, jp := e.Jobs, p.child("jobs")
	errs = append(errs, oneOf(jp.child("imagePullPolicy"), j.ImagePullPolicy, "Always", "IfNotPresent", "Never")...)
	errs = append(errs, positiveQty(jp.child("resources", "cpu"), j.Resources.CPU)...)
	errs = append(errs, positiveQty(jp.child("resources", "memory"), j.Resources.Memory)...)
	if j.Resources.CPULimit.Sign() < 0 || !j.Resources.CPULimit.IsZero() && j.Resources.CPULimit.Cmp(j.Resources.CPU) < 0 {
		errs = append(errs, invalid(jp.child("resources", "cpuLimit"), j.Resources.CPULimit.String(), "must be zero (none) or at least resources.cpu"))
	}
	for i, t := range j.Tolerations {
		tp := jp.child("tolerations").index(i)
		errs = append(errs, oneOf(tp.child("operator"), t.Operator, "", "Equal", "Exists")...)
		errs = append(errs, oneOf(tp.child("effect"), t.Effect, "", "NoSchedule", "PreferNoSchedule", "NoExecute")...)
		if t.Operator == "Exists" && t.Value != "" {
			errs = append(errs, invalid(tp.child("value"), t.Value, "must be empty with operator Exists"))
		}
	}
	errs = append(errs, atLeast(jp.child("parallelism"), int64(j.Parallelism), 1)...)
	errs = append(errs, atLeast(jp.child("backoffLimitPerIndex"), int64(j.BackoffLimitPerIndex), 0)...)
	errs = append(errs, atLeast(jp.child("ttlAfterFinished"), int64(j.TTLAfterFinished.Duration), 0)...)
	errs = append(errs, positive(jp.child("podStartGrace"), j.PodStartGrace)...)
	return errs
}

func validatePipeline(pl Pipeline, p path) ErrorList {
	errs := positiveQty(p.child("shardBytes"), pl.ShardBytes)
	errs = append(errs, atLeast(p.child("maxShards"), int64(pl.MaxShards), 1)...)
	errs = append(errs, oneOf(p.child("shardBy"), pl.ShardBy, "mx", "domain", "rows")...)
	errs = append(errs, positive(p.child("mxLookupTimeout"), pl.MXLookupTimeout)...)
	errs = append(errs, positive(p.child("mxLookupBudget"), pl.MXLookupBudget)...)
	errs = append(errs, atLeast(p.child("mxLookupConcurrency"), int64(pl.MXLookupConcurrency), 1)...)
	errs = append(errs, positiveQty(p.child("distributeMemory"), pl.DistributeMemory)...)
	errs = append(errs, positiveQty(p.child("dedupMemory"), pl.DedupMemory)...)
	errs = append(errs, positiveQty(p.child("limits", "maxExpandedBytes"), pl.Limits.MaxExpandedBytes)...)
	errs = append(errs, positiveQty(p.child("limits", "maxRecordBytes"), pl.Limits.MaxRecordBytes)...)
	if pl.Limits.MaxExpansionRatio == 0 {
		errs = append(errs, invalid(p.child("limits", "maxExpansionRatio"), 0, "must be positive, or negative for no cap"))
	}
	return errs
}

func validateVerification(v Verification, p path) ErrorList {
	var errs ErrorList
	if s := v.DNS.Server; s != "system" && s != "off" {
		if h, port, err := net.SplitHostPort(s); err != nil || h == "" || port == "" {
			errs = append(errs, invalid(p.child("dns", "server"), s, `must be "system", "off" or host:port`))
		}
	}
	errs = append(errs, positive(p.child("dns", "timeout"), v.DNS.Timeout)...)
	errs = append(errs, atLeast(p.child("dns", "workers"), int64(v.DNS.Workers), 1)...)
	errs = append(errs, validateSMTP(v.SMTP, p.child("smtp"))...)
	ip := p.child("interactive")
	for name, d := range map[string]Duration{"connectTimeout": v.Interactive.ConnectTimeout,
		"greetingTimeout": v.Interactive.GreetingTimeout, "commandTimeout": v.Interactive.CommandTimeout} {
		errs = append(errs, positive(ip.child(name), d)...)
	}
	for i, u := range v.Proxies.URLs {
		pp := p.child("proxies", "urls").index(i)
		if pu, err := url.Parse(u); err != nil || pu.Scheme != "socks5" || pu.Host == "" {
			errs = append(errs, invalid(pp, u, "must be socks5://host:port"))
		}
	}
	errs = append(errs, atLeast(p.child("proxies", "maxConnsPerProxy"), int64(v.Proxies.MaxConnsPerProxy), 1)...)
	errs = append(errs, atLeast(p.child("rowsInFlight"), int64(v.RowsInFlight), 1)...)
	errs = append(errs, atLeast(p.child("groupRows"), int64(v.GroupRows), 1)...)
	hp := p.child("history")
	errs = append(errs, oneOf(hp.child("scope"), v.History.Scope, "tenant", "shared")...)
	for name, d := range map[string]Duration{"deliverable": v.History.TTLs.Deliverable, "undeliverable": v.History.TTLs.Undeliverable,
		"catchAll": v.History.TTLs.CatchAll, "unverified": v.History.TTLs.Unverified} {
		errs = append(errs, atLeast(hp.child("ttls", name), int64(d.Duration), 0)...)
	}
	errs = append(errs, positive(hp.child("keyCheckInterval"), v.History.KeyCheckInterval)...)
	return errs
}

func validateSMTP(s SMTP, p path) ErrorList {
	var errs ErrorList
	if s.Port < 1 || s.Port > 65535 {
		errs = append(errs, invalid(p.child("port"), s.Port, "must be a TCP port"))
	}
	if s.HELOName == "" {
		errs = append(errs, FieldError{string(p.child("heloName")), "required: mail servers refuse an empty EHLO"})
	}
	for name, n := range map[string]int{"maxConnsPerHost": s.MaxConnsPerHost, "maxSleepingConnsPerHost": s.MaxSleepingConnsPerHost, "maxSessions": s.MaxSessions,
		"maxRcptPerTransaction": s.MaxRcptPerTransaction, "maxRcptPerSession": s.MaxRcptPerSession, "pipelineDepth": s.PipelineDepth,
		"maxRefusals": s.MaxRefusals} {
		errs = append(errs, atLeast(p.child(name), int64(n), 1)...)
	}
	if s.MaxSleepingSessions < -1 {
		errs = append(errs, invalid(p.child("maxSleepingSessions"), s.MaxSleepingSessions, "must be positive, 0 for half of maxSessions, or -1 for none"))
	}
	if s.MaxRejectsPerSession < -1 || s.MaxRejectsPerSession == 0 {
		errs = append(errs, invalid(p.child("maxRejectsPerSession"), s.MaxRejectsPerSession, "must be positive, or -1 for no limit"))
	}
	if s.RatePerHost <= 0 {
		errs = append(errs, invalid(p.child("ratePerHost"), s.RatePerHost, "must be positive"))
	}
	for name, d := range map[string]Duration{"refusalBackoff": s.RefusalBackoff, "connectTimeout": s.ConnectTimeout,
		"greetingTimeout": s.GreetingTimeout, "commandTimeout": s.CommandTimeout, "greylistRetry": s.GreylistRetry,
		"hostMemoryTTL": s.HostMemoryTTL} {
		errs = append(errs, positive(p.child(name), d)...)
	}
	return append(errs, cidrs(p.child("allowCIDRs"), s.AllowCIDRs)...)
}

func validateAPI(a API, p path) ErrorList {
	errs := positiveQty(p.child("maxUploadSize"), a.MaxUploadSize)
	errs = append(errs, positiveQty(p.child("feedbackMaxSize"), a.FeedbackMaxSize)...)
	errs = append(errs, atLeast(p.child("feedbackFiles"), int64(a.FeedbackFiles), 1)...)
	errs = append(errs, atLeast(p.child("feedbackFilesPerTenant"), int64(a.FeedbackFilesPerTenant), 1)...)
	if a.RateLimit.PerSecond <= 0 {
		errs = append(errs, invalid(p.child("rateLimit", "perSecond"), a.RateLimit.PerSecond, "must be positive"))
	}
	errs = append(errs, atLeast(p.child("rateLimit", "burst"), int64(a.RateLimit.Burst), 1)...)
	errs = append(errs, atLeast(p.child("shutdownTimeout"), int64(a.ShutdownTimeout.Duration), 0)...)
	errs = append(errs, atLeast(p.child("drainDelay"), int64(a.DrainDelay.Duration), 0)...)
	errs = append(errs, positive(p.child("throttle", "bodyStall"), a.Throttle.BodyStall)...)
	errs = append(errs, atLeast(p.child("throttle", "trackedAddresses"), int64(a.Throttle.TrackedAddresses), 1)...)
	return append(errs, cidrs(p.child("throttle", "trustedProxies"), a.Throttle.TrustedProxies)...)
}

// installationSecretKinds are the kinds installation.secrets may name.
var installationSecretKinds = []string{"list-id-key", "callback-signing", "history-key", "fraud-history-key"}

func validateInstallation(in Installation, p path) ErrorList {
	errs := dnsSubdomain(p.child("listIDConfigMap"), in.ListIDConfigMap)
	for k, name := range in.Secrets {
		errs = append(errs, oneOf(p.child("secrets").key(k), k, installationSecretKinds...)...)
		errs = append(errs, dnsSubdomain(p.child("secrets").key(k), name)...)
	}
	for i, k := range in.ExternalSecrets {
		errs = append(errs, oneOf(p.child("externalSecrets").index(i), k, installationSecretKinds...)...)
	}
	return errs
}

func oneOf(p path, v string, allowed ...string) ErrorList {
	if slices.Contains(allowed, v) {
		return nil
	}
	return ErrorList{notSupported(p, v, allowed)}
}

func atLeast(p path, v, least int64) ErrorList {
	if v >= least {
		return nil
	}
	return ErrorList{invalid(p, v, "must be at least "+itoa(least))}
}

func positive(p path, d Duration) ErrorList {
	if d.Duration > 0 {
		return nil
	}
	return ErrorList{invalid(p, d.Duration.String(), "must be positive")}
}

func positiveQty(p path, q Quantity) ErrorList {
	if q.Sign() > 0 {
		return nil
	}
	return ErrorList{invalid(p, q.String(), "must be positive")}
}

func cidrs(p path, vs []string) ErrorList {
	var errs ErrorList
	for i, v := range vs {
		if _, err := netip.ParsePrefix(v); err != nil {
			errs = append(errs, invalid(p.index(i), v, "must be a CIDR such as 10.0.0.0/8"))
		}
	}
	return errs
}

func dns1123(p path, v string) ErrorList {
	if isDNS1123Label(v) {
		return nil
	}
	return ErrorList{invalid(p, v, "must be a DNS label: lower case letters, digits and '-', at most 63")}
}

func dnsSubdomain(p path, v string) ErrorList {
	if isDNS1123Subdomain(v) {
		return nil
	}
	return ErrorList{invalid(p, v, "must be a DNS subdomain: lower case letters, digits, '-' and '.', at most 253")}
}

// noPassword refuses a URL written with a password: the file is not a
// Secret. env names where such a URL goes instead.
func noPassword(p path, raw, env string) ErrorList {
	if !HasPassword(raw) {
		return nil
	}
	return ErrorList{FieldError{string(p), "forbidden: a URL with a password belongs in a Secret: give it as " + env + " (the file is not a Secret)"}}
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
