package wiring

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	neturl "net/url"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/emaildata/emaildata/internal/engine/fleet"
	"github.com/emaildata/emaildata/internal/engine/verify"
	"github.com/emaildata/emaildata/internal/refdata/fraud"
	"github.com/emaildata/emaildata/internal/refdata/people"
)

// FraudConfig configures GET /fr and the fraud feedback routes.
type FraudConfig struct {
	// ConfigPath is a weights/thresholds file (a mounted ConfigMap),
	// reloaded on change; empty uses the embedded defaults.
	ConfigPath string
	// GeoIPPaths are MaxMind-format databases, comma separated.
	GeoIPPaths string
	// HistoryURL keeps the fraud history (queries) and feedback (reports):
	// postgres://... or redis://host:port/db[?prefix=emaildata:], shared
	// by all API replicas and durable; "memory", this process's memory
	// (make run: lost on restart); or empty: the fleet backend (Fleet)
	// when there is one and a key is given (HistoryKeyFile or
	// HistoryKey), else this process's memory for /fr queries with
	// feedback refused (503), so that reports are never kept where a
	// restart loses them or one replica alone sees them. A PostgreSQL pool gets 16 connections unless the URL sets
	// pool_max_conns.
	HistoryURL string
	// HistoryKeyFile holds the key that digests identifiers in history; all
	// replicas sharing a history need the same key (a Secret). A shared
	// history needs it or HistoryKey.
	HistoryKeyFile string
	// HistoryKey is that key itself, when no file gives it: $FRAUD_HISTORY_KEY
	// in DefaultFraudConfig (a Secret's key in the environment, such as the
	// chart's store.credentialsSecret gives: an installation that set it
	// keeps it), else, when a durable store needs one (NeedsKeySecret),
	// the key the API read from its installation secret
	// (internal/platform/installsecret, FraudHistoryKey). Not a flag: a
	// key never goes on a command line.
	HistoryKey string
	// Budget bounds the email check inside one call.
	Budget time.Duration
	// SMTP adds the mailbox check to that email check.
	SMTP bool

	// Fleet is the fleet backend (FleetOf the engine), whose Redis keeps
	// the history when HistoryURL is empty; nil for none. Not a flag.
	Fleet *fleet.Fleet
	// Log says at start where history and feedback are kept. Not a flag.
	Log *slog.Logger
}

// HistoryMemory is FraudConfig.HistoryURL for a history in this process's
// memory.
const HistoryMemory = "memory"

// DefaultFraudConfig is the configuration the API starts from: the history
// URL from $FRAUD_HISTORY_URL and its key from $FRAUD_HISTORY_KEY, so that
// a Secret in the environment (the chart's store.credentialsSecret) can
// give both.
func DefaultFraudConfig() FraudConfig { return FraudFrom(defaultConfig()) }

// NeedsKeySecret reports whether the fraud history c names is durable
// and shared (a --fraud-history-url other than memory, or, without one,
// the fleet backend when fleet is true) and no key was given: the API
// then reads it from its installation secret into HistoryKey. make run
// keeps its history in memory and needs none.
func (c FraudConfig) NeedsKeySecret(fleet bool) bool {
	durable := c.HistoryURL != "" && c.HistoryURL != HistoryMemory || c.HistoryURL == "" && fleet
	return durable && c.HistoryKeyFile == "" && c.HistoryKey == ""
}

// FleetOf returns e's fleet backend, nil when it has none.
func FleetOf(e *verify.Engine) *fleet.Fleet {
	if e == nil {
		return nil
	}
	for _, r := range e.Reporters {
		if f, ok := r.(*fleet.Fleet); ok {
			return f
		}
	}
	return nil
}

// NewFraud builds the fraud scorer, starting its config watcher. A people
// store, when given, fills the postal *_match fields. It logs where the
// history and feedback are kept.
func NewFraud(ctx context.Context, c FraudConfig, store people.Store) (*fraud.Scorer, error) {
	log := c.Log
	if log == nil {
		log = slog.Default()
	}
	cfg := fraud.DefaultConfig()
	if c.ConfigPath != "" {
		var err error
		if cfg, err = fraud.LoadConfig(c.ConfigPath); err != nil {
			return nil, fmt.Errorf("fraud config: %w", err)
		}
	}
	var deps fraud.Deps
	if store != nil {
		deps.People = personLookup{store}
	}
	if c.GeoIPPaths != "" {
		db, err := fraud.OpenMaxMind(strings.Split(c.GeoIPPaths, ",")...)
		if err != nil {
			return nil, fmt.Errorf("geoip: %w", err)
		}
		deps.GeoIP = db
	}
	if err := openFraudHistory(ctx, c, cfg, &deps, log); err != nil {
		return nil, err
	}
	s := fraud.New(cfg, deps)
	if c.ConfigPath != "" {
		w := fraud.NewWatcher(s, c.ConfigPath, 10*time.Second)
		go func() { _ = w.Run(ctx) }()
	}
	return s, nil
}

// openFraudHistory sets deps' History, HistoryKey and NoFeedback from c;
// a Redis history keeps queries for the longer of cfg's windows (at least
// its default week).
func openFraudHistory(ctx context.Context, c FraudConfig, cfg fraud.Config, deps *fraud.Deps, log *slog.Logger) error {
	ro := fraud.RedisOptions{Retain: max(7*24*time.Hour, time.Duration(cfg.Network.Window), time.Duration(cfg.Velocity.Window))}
	url := c.HistoryURL
	onFleet := false
	if url == "" && c.Fleet != nil {
		if c.HistoryKeyFile == "" && c.HistoryKey == "" {
			log.Warn("fraud history not kept on the fleet backend: no key (its installation secret, --fraud-history-key-file or $FRAUD_HISTORY_KEY, from a Secret, not from the backend)")
		} else {
			onFleet = true
		}
	}
	shared := onFleet || url != "" && url != HistoryMemory
	switch {
	case c.HistoryKeyFile != "":
		key, err := os.ReadFile(c.HistoryKeyFile)
		if err != nil {
			return fmt.Errorf("fraud history key: %w", err)
		}
		if len(bytes.TrimSpace(key)) == 0 {
			return fmt.Errorf("fraud history key file %s is empty", c.HistoryKeyFile)
		}
		deps.HistoryKey = key
	case c.HistoryKey != "":
		deps.HistoryKey = []byte(c.HistoryKey)
	case shared:
		return fmt.Errorf("--fraud-history-url needs --fraud-history-key-file (or $FRAUD_HISTORY_KEY, or in a cluster the installation secret --fraud-history-key-secret names), so that replicas agree on digests")
	default:
		deps.HistoryKey = make([]byte, 32)
		_, _ = rand.Read(deps.HistoryKey)
	}
	switch {
	case onFleet:
		r := c.Fleet.Backend()
		ro.Prefix = r.Prefix()
		deps.History = fraud.NewRedisHistory(r.Client(), ro)
		log.Info("fraud history and feedback kept on the fleet backend (Redis), shared by every replica")
	case strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://"):
		h, err := openFraudPostgres(ctx, url)
		if err != nil {
			return err
		}
		deps.History = h
		log.Info("fraud history and feedback kept in PostgreSQL, shared by every replica", "url", fleet.Redacted(url))
	case strings.HasPrefix(url, "redis://") || strings.HasPrefix(url, "rediss://"):
		rdb, prefix, err := openFraudRedis(url)
		if err != nil {
			return err
		}
		context.AfterFunc(ctx, func() { _ = rdb.Close() })
		ro.Prefix = prefix
		deps.History = fraud.NewRedisHistory(rdb, ro)
		log.Info("fraud history and feedback kept in Redis, shared by every replica", "url", fleet.Redacted(url))
	case url == HistoryMemory:
		deps.History = fraud.NewMemoryHistory(0, 256)
		log.Warn("fraud history and feedback kept in this process's memory: lost on restart, seen by this process only (make run)")
	case url == "":
		deps.History, deps.NoFeedback = fraud.NewMemoryHistory(0, 256), true
		log.Warn("fraud history kept in this process's memory (this replica only, lost on restart); POST /feedback/v1 is refused until --fraud-history-url (PostgreSQL or Redis) or --fleet-url, with the history key (--fraud-history-key-file or $FRAUD_HISTORY_KEY), gives it a durable store")
	default:
		return fmt.Errorf("--fraud-history-url %s: not postgres://, redis:// or %q", fleet.Redacted(url), HistoryMemory)
	}
	return nil
}

// openFraudPostgres opens and migrates a PostgreSQL history.
func openFraudPostgres(ctx context.Context, url string) (*fraud.PostgresHistory, error) {
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("fraud history: %s: %w", fleet.Redacted(url), err)
	}
	if !strings.Contains(url, "pool_max_conns") {
		// Room for the feedback files under way (each holds a
		// transaction) beside the /fr queries.
		pc.MaxConns = 16
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("fraud history: %w", err)
	}
	context.AfterFunc(ctx, pool.Close)
	h, err := fraud.NewPostgresHistory(pool, fraud.PostgresOptions{})
	if err != nil {
		return nil, err
	}
	if err := h.Migrate(ctx); err != nil {
		return nil, fmt.Errorf("fraud history schema: %w", err)
	}
	return h, nil
}

// openFraudRedis connects (lazily) to the Redis of url; its prefix query
// parameter, "emaildata:" by default, starts the keys.
func openFraudRedis(raw string) (*redis.Client, string, error) {
	u, err := neturl.Parse(raw)
	if err != nil {
		return nil, "", fmt.Errorf("--fraud-history-url: %w", err)
	}
	prefix := "emaildata:"
	q := u.Query()
	if q.Has("prefix") {
		prefix = q.Get("prefix")
		q.Del("prefix")
	}
	u.RawQuery = q.Encode()
	opt, err := redis.ParseURL(u.String())
	if err != nil {
		return nil, "", fmt.Errorf("--fraud-history-url %s: %w", fleet.Redacted(raw), err)
	}
	if !q.Has("read_timeout") {
		opt.ReadTimeout = 2 * time.Second // a feedback batch is one script
	}
	return redis.NewClient(opt), prefix, nil
}

// personLookup answers the fraud scorer's reference-person questions from
// the people store.
type personLookup struct{ s people.Store }

func (p personLookup) Lookup(ctx context.Context, email string) (first, last, street, city, zip string, ok bool) {
	rec, err := p.s.Get(ctx, people.EmailKey(email))
	if err != nil || rec == nil {
		return "", "", "", "", "", false
	}
	return rec.First, rec.Last, rec.Street, rec.City, rec.Zip, true
}
