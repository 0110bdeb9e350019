package wiring

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/emaildata/emaildata/internal/engine/evhistory"
	"github.com/emaildata/emaildata/internal/engine/fleet"
	"github.com/emaildata/emaildata/internal/engine/verify"
)

// FleetConfig names the shared backend of per-host limits, learnt host
// state and (by default) the verification history, and this process's
// place in the fleet. The SMTP engine takes its per-host connection slots
// and rates from the backend and shares what it learns through it (issue
// 22); without a URL a process keeps its own, and the manager divides each
// host's budget among a list's pods (JobConfig.SMTPBudget).
type FleetConfig struct {
	// URL is redis://host:port/db ("" none: in-process limits).
	URL string
	// Egress names this cluster's own address as an egress identity;
	// each SOCKS5 proxy counts on its own.
	Egress string
	// LeaseTTL: a killed process's connection slots are free again
	// within it.
	LeaseTTL time.Duration
	// Seat and Seats: this process's share of each host's budget while
	// the backend is unreachable (Job pods: the completion index of the
	// list's shards; -1: $JOB_COMPLETION_INDEX, else 0).
	Seat, Seats int
	// Required: refuse to start without a URL (the manager sets it for Job
	// pods when it gives them the whole budget, so that a pod missing the
	// URL, say from --worker-env-secret, cannot spend it alone).
	Required bool
}

// share is the divided share of a process.
func (c FleetConfig) share() fleet.Share {
	seat := c.Seat
	if seat < 0 {
		seat, _ = strconv.Atoi(os.Getenv("JOB_COMPLETION_INDEX"))
	}
	return fleet.Share{Seat: seat, Seats: max(1, c.Seats)}
}

// openShared opens the fleet backend and the verification history of c
// into e; both close when ctx ends. The fleet (nil without --fleet-url) is
// for the SMTP engine.
func openShared(ctx context.Context, e *verify.Engine, c VerifyConfig) (*fleet.Fleet, error) {
	log := c.Log
	if log == nil {
		log = slog.Default()
	}
	if c.Fleet.Required && c.Fleet.URL == "" {
		return nil, errors.New("--fleet-required: no --fleet-url (nor $FLEET_URL): this process would spend each mail host's whole budget alone; give it the fleet backend's URL (Job pods: in --worker-env-secret when it holds a password)")
	}
	var f *fleet.Fleet
	if c.Fleet.URL != "" {
		var err error
		f, err = fleet.Open(ctx, c.Fleet.URL, fleet.Options{LeaseTTL: c.Fleet.LeaseTTL, Share: c.Fleet.share(), Clock: processClock})
		if err != nil {
			return nil, fmt.Errorf("--fleet-url: %w", err)
		}
		f.OnMode = func(m fleet.Mode, why string) {
			if m == fleet.ModeFallback {
				log.Warn("fleet backend unreachable: each host's budget is divided (never unlimited) until it answers", "reason", why)
			} else {
				log.Info("fleet backend in use", "reason", why)
			}
		}
		log.Info("fleet backend", "url", fleet.Redacted(c.Fleet.URL), "mode", string(f.Mode()), "egress", c.Fleet.Egress)
		e.Reporters = append(e.Reporters, f)
		context.AfterFunc(ctx, func() { _ = f.Close() })
	}
	h, err := openHistory(ctx, c, f, log)
	if err != nil {
		return nil, err
	}
	if h != nil {
		e.History = h
		e.Reporters = append(e.Reporters, h)
	}
	return f, nil
}

// openHistory opens c's verification history: c.History, HistoryURL, or
// the fleet backend; nil for none. A history needs its key (HistoryKey,
// --history-key-file or HISTORY_KEY): without one the process refuses to start rather
// than key the history with a secret kept beside it, or run without it
// unnoticed (twice the probes).
func openHistory(ctx context.Context, c VerifyConfig, f *fleet.Fleet, log *slog.Logger) (*evhistory.History, error) {
	if c.History != nil {
		return c.History, nil
	}
	url := c.HistoryURL
	o := evhistory.Options{TTLs: c.HistoryTTLs, Scope: c.HistoryScope, KeyCheckEvery: c.HistoryKeyCheck, Log: log, Clock: processClock}
	switch {
	case url == "off":
		return nil, nil
	case url == "" && f != nil:
		url = c.Fleet.URL
		o.Redis = f.Backend().Client()
	case url == "":
		return nil, nil
	case url == c.Fleet.URL && f != nil:
		o.Redis = f.Backend().Client()
	}
	key, _, err := c.GivenHistoryKey()
	if err == nil && key == nil {
		_, err = evhistory.LoadSecret("") // says what to set
	}
	if err != nil {
		return nil, fmt.Errorf("verification history %s: %w", fleet.Redacted(url), err)
	}
	o.Secret = key
	h, err := evhistory.Open(ctx, url, o)
	if err != nil {
		return nil, fmt.Errorf("--history-url: %w", err)
	}
	log.Info("verification history", "url", fleet.Redacted(url), "scope", string(h.Scope()), "key", h.Fingerprint())
	context.AfterFunc(ctx, func() { _ = h.Close() }) // a shared fleet client stays open
	return h, nil
}

// NamesHistory reports whether a process with c's flags opens a
// verification history (and so needs its key): --history-url other than
// "off", or a --fleet-url backend that keeps it by default.
func (c VerifyConfig) NamesHistory() bool {
	return c.HistoryURL != "off" && (c.HistoryURL != "" || c.Fleet.URL != "")
}

// GivenHistoryKey returns the history key this process was given, and
// where from: HistoryKey (read from the installation secret), else
// --history-key-file, else $HISTORY_KEY (both read by
// evhistory.LoadSecret, which checks them); nil and "" when none was.
func (c VerifyConfig) GivenHistoryKey() (key []byte, from string, err error) {
	switch {
	case c.HistoryKey != nil:
		return c.HistoryKey, "the installation secret", nil
	case c.HistoryKeyFile != "":
		key, err = evhistory.LoadSecret(c.HistoryKeyFile)
		return key, "--history-key-file", err
	case strings.TrimSpace(os.Getenv(evhistory.SecretEnv)) != "":
		key, err = evhistory.LoadSecret("")
		return key, "$" + evhistory.SecretEnv, err
	}
	return nil, "", nil
}

// NeedsHistoryKeySecret reports whether a process with c opens a
// verification history whose key it was not given: the manager and the
// API then read it from its installation secret into HistoryKey.
func (c VerifyConfig) NeedsHistoryKeySecret() bool {
	return c.NamesHistory() && c.History == nil && c.HistoryKey == nil && c.HistoryKeyFile == "" &&
		strings.TrimSpace(os.Getenv(evhistory.SecretEnv)) == ""
}

// HistoryHealth returns whether e's verification history is in use, and
// why not (its store kept under another key); nil when e has none.
func HistoryHealth(e *verify.Engine) func() (ok bool, detail string) {
	if e == nil {
		return nil
	}
	if h, ok := e.History.(*evhistory.History); ok {
		return h.Health
	}
	return nil
}

// FleetHealth returns whether e's fleet backend answers, and why not; nil
// when e has none.
func FleetHealth(e *verify.Engine) func() (up bool, detail string) {
	if e == nil {
		return nil
	}
	for _, r := range e.Reporters {
		if f, ok := r.(*fleet.Fleet); ok {
			return func() (bool, string) {
				if f.Mode() == fleet.ModeFallback {
					return false, "unreachable since the last health checks"
				}
				return true, ""
			}
		}
	}
	return nil
}
