package wiring

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/emaildata/emaildata/internal/refdata/fraud"
	"github.com/emaildata/emaildata/internal/refdata/people"
)

// FraudConfig configures GET /fr.
type FraudConfig struct {
	// ConfigPath is a weights/thresholds file (a mounted ConfigMap),
	// reloaded on change; empty uses the embedded defaults.
	ConfigPath string
	// GeoIPPaths are MaxMind-format databases, comma separated.
	GeoIPPaths string
	// HistoryURL is a PostgreSQL URL shared by all API replicas; empty keeps
	// history in memory (one replica's view only).
	HistoryURL string
	// HistoryKeyFile holds the key that digests identifiers in history; all
	// replicas sharing a history need the same key.
	HistoryKeyFile string
	// Budget bounds the email check inside one call.
	Budget time.Duration
	// SMTP adds the mailbox check to that email check.
	SMTP bool
}

// BindFlags registers the flags on fs.
func (c *FraudConfig) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.ConfigPath, "fraud-config", c.ConfigPath, "fraud weights and thresholds file (reloaded on change)")
	fs.StringVar(&c.GeoIPPaths, "geoip-db", c.GeoIPPaths, "MaxMind-format GeoIP databases, comma separated")
	fs.StringVar(&c.HistoryURL, "fraud-history-url", c.HistoryURL, "PostgreSQL URL for shared fraud history (default: in memory)")
	fs.StringVar(&c.HistoryKeyFile, "fraud-history-key-file", c.HistoryKeyFile, "file with the key that digests identifiers in fraud history")
	fs.DurationVar(&c.Budget, "fraud-email-budget", 1500*time.Millisecond, "time budget of the email check in GET /fr")
	fs.BoolVar(&c.SMTP, "fraud-smtp", false, "run the SMTP mailbox check inside GET /fr")
}

// NewFraud builds the fraud scorer, starting its config watcher. A people
// store, when given, fills the postal *_match fields.
func NewFraud(ctx context.Context, c FraudConfig, store people.Store) (*fraud.Scorer, error) {
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
	switch {
	case c.HistoryKeyFile != "":
		key, err := os.ReadFile(c.HistoryKeyFile)
		if err != nil {
			return nil, fmt.Errorf("fraud history key: %w", err)
		}
		deps.HistoryKey = key
	case c.HistoryURL != "":
		return nil, fmt.Errorf("--fraud-history-url needs --fraud-history-key-file, so that replicas agree on digests")
	default:
		deps.HistoryKey = make([]byte, 32)
		_, _ = rand.Read(deps.HistoryKey)
	}
	if c.HistoryURL != "" {
		pool, err := pgxpool.New(ctx, c.HistoryURL)
		if err != nil {
			return nil, fmt.Errorf("fraud history: %w", err)
		}
		h, err := fraud.NewPostgresHistory(pool, fraud.PostgresOptions{})
		if err != nil {
			return nil, err
		}
		if err := h.Migrate(ctx); err != nil {
			return nil, fmt.Errorf("fraud history schema: %w", err)
		}
		deps.History = h
	} else {
		deps.History = fraud.NewMemoryHistory(1_000_000, 256)
	}
	s := fraud.New(cfg, deps)
	if c.ConfigPath != "" {
		w := fraud.NewWatcher(s, c.ConfigPath, 10*time.Second)
		go func() { _ = w.Run(ctx) }()
	}
	return s, nil
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
