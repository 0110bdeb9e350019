package v1alpha1

import (
	"time"

	"github.com/emaildata/emaildata/internal/engine/evhistory"
	"github.com/emaildata/emaildata/internal/engine/fleet"
	"github.com/emaildata/emaildata/internal/engine/smtpprobe"
	"github.com/emaildata/emaildata/internal/lists/listfile"
	"github.com/emaildata/emaildata/internal/lists/pipeline"
)

// Default returns the configuration of an empty file: every default, in
// this one place. Settings whose engine owns its default (the SMTP
// prober's politeness, the history's TTLs, the input limits) take it from
// there, so that it is written once; the rest are written here.
func Default() *Configuration {
	c := &Configuration{}
	trueDefaults(c)
	SetDefaults(c)
	return c
}

// SetDefaults fills every field of c left at its zero value. The loader
// decodes a file over Default() instead, so that a zero written in the
// file (a TTL of 0s: never kept) stays zero.
func SetDefaults(c *Configuration) {
	c.APIVersion, c.Kind = APIVersion, Kind
	setDefaultsTop(c)
	setDefaultsExecutor(&c.Executor)
	setDefaultsPipeline(&c.Pipeline)
	setDefaultsVerification(&c.Verification)
	setDefaultsAPI(&c.API)
}

// trueDefaults sets the booleans whose default is true (false cannot be
// told from unset: only a fresh configuration gets them).
func trueDefaults(c *Configuration) {
	c.Verification.SMTP.Enabled = true
	c.Metrics.Secure = true
	c.API.Console.Enabled = true
}

func setDefaultsTop(c *Configuration) {
	str(&c.Logging.Level, "info")
	str(&c.Logging.Format, "json")
	str(&c.Store.MountPath, "/var/lib/emaildata")
	dur(&c.Store.OrphanUploadAge, 24*time.Hour)
	dur(&c.Store.UploadSweepInterval, 10*time.Minute)
	str(&c.Fleet.Egress, fleet.DefaultEgress)
	dur(&c.Fleet.LeaseTTL, 5*time.Second)
	dur(&c.Fraud.EmailBudget, 1500*time.Millisecond)
	dur(&c.Manager.SourceGrace, 2*time.Minute)
	str(&c.Manager.LeaderElectionID, "emaildata-manager.lists.emaildata.io")
	str(&c.Installation.ListIDConfigMap, "emaildata-list-ids")
}

func setDefaultsExecutor(e *Executor) {
	str(&e.Mode, "job")
	num(&e.MaxConcurrentReconciles, 4)
	j := &e.Jobs
	str(&j.ImagePullPolicy, "IfNotPresent")
	qty(&j.Resources.CPU, "500m")
	qty(&j.Resources.Memory, "256Mi")
	num(&j.Parallelism, 8)
	num(&j.BackoffLimitPerIndex, 2)
	dur(&j.TTLAfterFinished, time.Hour)
	dur(&j.ActiveDeadline, 24*time.Hour)
	dur(&j.PodStartGrace, 2*time.Minute)
}

func setDefaultsPipeline(p *Pipeline) {
	d := pipeline.DefaultConfig()
	size(&p.ShardBytes, d.ShardBytes)
	num(&p.MaxShards, d.MaxShards)
	str(&p.ShardBy, pipeline.ShardByMX) // the cluster's; `worker run` cuts by rows
	dur(&p.MXLookupTimeout, pipeline.DefaultMXLookupTimeout)
	dur(&p.MXLookupBudget, pipeline.DefaultMXLookupBudget)
	num(&p.MXLookupConcurrency, pipeline.DefaultMXConcurrency)
	size(&p.DistributeMemory, d.DistributeMemory)
	size(&p.DedupMemory, d.DedupMemory)
	l := listfile.DefaultLimits()
	size(&p.Limits.MaxExpandedBytes, l.MaxExpandedBytes)
	size(&p.Limits.MaxRecordBytes, int64(l.MaxRecordBytes))
	num(&p.Limits.MaxExpansionRatio, l.MaxExpansionRatio)
}

func setDefaultsVerification(v *Verification) {
	str(&v.DNS.Server, "system")
	dur(&v.DNS.Timeout, 2*time.Second)
	num(&v.DNS.Workers, 64)
	setDefaultsSMTP(&v.SMTP)
	i := &v.Interactive
	dur(&i.ConnectTimeout, 5*time.Second)
	dur(&i.GreetingTimeout, 10*time.Second)
	dur(&i.CommandTimeout, 10*time.Second)
	dur(&i.HostPenaltyTTL, 5*time.Minute)
	num(&v.Proxies.MaxConnsPerProxy, 100)
	num(&v.RowsInFlight, 100_000)
	num(&v.GroupRows, 1_000) // no grouping: see GroupRows
	t := evhistory.DefaultTTLs()
	dur(&v.History.TTLs.Deliverable, t.Deliverable)
	dur(&v.History.TTLs.Undeliverable, t.Undeliverable)
	dur(&v.History.TTLs.CatchAll, t.CatchAll)
	dur(&v.History.TTLs.Unverified, t.Unverified)
	str(&v.History.Scope, string(evhistory.DefaultScope))
	dur(&v.History.KeyCheckInterval, evhistory.DefaultKeyCheckEvery)
	str(&v.History.Tenant, evhistory.LocalTenant)
}

// setDefaultsSMTP takes the prober's own defaults (smtpprobe.DefaultConfig
// is their one home) but for the names a production probe announces.
func setDefaultsSMTP(s *SMTP) {
	p := smtpprobe.DefaultConfig()
	num(&s.Port, p.Port)
	str(&s.HELOName, "verify.emaildata.local")
	str(&s.MailFrom, "verify@emaildata.local")
	num(&s.MaxConnsPerHost, p.MaxConnsPerHost)
	num(&s.MaxSleepingConnsPerHost, p.MaxSleepingConnsPerHost)
	if s.RatePerHost == 0 {
		s.RatePerHost = p.RatePerHost
	}
	num(&s.MaxSessions, p.MaxSessions)
	num(&s.MaxRcptPerTransaction, p.MaxRcptPerTransaction)
	num(&s.MaxRcptPerSession, p.MaxRcptPerSession)
	num(&s.MaxRejectsPerSession, p.MaxRejectsPerSession)
	num(&s.PipelineDepth, p.PipelineDepth)
	dur(&s.RefusalBackoff, p.RefusalBackoff)
	dur(&s.ConnectTimeout, p.ConnectTimeout)
	dur(&s.GreetingTimeout, p.GreetingTimeout)
	dur(&s.CommandTimeout, p.CommandTimeout)
	dur(&s.HostPenaltyTTL, p.HostPenaltyTTL)
	dur(&s.GreylistRetry, p.GreylistRetry)
	num(&s.MaxRefusals, p.MaxRefusals)
	dur(&s.HostMemoryTTL, p.HostMemoryTTL)
}

func setDefaultsAPI(a *API) {
	size(&a.MaxUploadSize, 1<<30)
	size(&a.FeedbackMaxSize, 16<<20)
	num(&a.FeedbackFiles, 4)
	num(&a.FeedbackFilesPerTenant, 2)
	if a.RateLimit.PerSecond == 0 {
		a.RateLimit.PerSecond = 50
	}
	num(&a.RateLimit.Burst, 100)
	dur(&a.ShutdownTimeout, 45*time.Second)
	dur(&a.DrainDelay, 5*time.Second)
	t := &a.Throttle
	num(&t.BodyMinRate, 1024)
	dur(&t.BodyStall, 30*time.Second)
	num(&t.UploadsPerKey, 8)
	num(&t.UploadsPerTenant, 16)
	if t.AuthFailureRate == 0 {
		t.AuthFailureRate = 0.5
	}
	num(&t.AuthFailureBurst, 20)
	if t.ForbiddenRate == 0 {
		t.ForbiddenRate = 1
	}
	num(&t.ForbiddenBurst, 30)
	num(&t.TrackedAddresses, 100_000)
}

func str(s *string, v string) {
	if *s == "" {
		*s = v
	}
}

func num[T int | int32 | int64](n *T, v T) {
	if *n == 0 {
		*n = v
	}
}

func dur(d *Duration, v time.Duration) {
	if d.Duration == 0 {
		d.Duration = v
	}
}

func qty(q *Quantity, v string) {
	if q.IsZero() {
		*q = MustParseQuantity(v)
	}
}

func size(q *Quantity, v int64) {
	if q.IsZero() {
		*q = Bytes(v)
	}
}
