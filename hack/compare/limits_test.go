package main

import (
	"testing"
	"time"

	"github.com/emaildata/emaildata/internal/engine/smtpprobe"
	"github.com/emaildata/emaildata/internal/kits/mailworld"
)

// TestFewestSessions: the fewest sessions a host group's limits allow,
// bound by bound.
func TestFewestSessions(t *testing.T) {
	postfix := smtpprobe.ServerLimits{SoftErrors: 10, HardErrors: 20, ErrorSleep: time.Second}
	limited := smtpprobe.ServerLimits{RcptsPerSession: 20}
	for _, tc := range []struct {
		name                              string
		l                                 smtpprobe.ServerLimits
		rcpts, rejects, grey, retryReject int
		want                              int
	}{
		{"no limits", smtpprobe.ServerLimits{}, 500, 300, 0, 0, 1},
		{"19 errors a session", postfix, 500, 57, 0, 0, 3},
		{"20 RCPTs a session", limited, 41, 0, 0, 0, 3},
		// Greylisting: the retries need a session of their own.
		{"greylisting, no limits", smtpprobe.ServerLimits{}, 30, 30, 30, 12, 2},
		// Every first ask a 451 (25 errors: 2 sessions), the retries' 20
		// refusals 2 more: 4, though 45 errors would fit 3.
		{"greylisting Postfix", postfix, 25, 25, 25, 20, 4},
		// Others' addresses fill the greylisted ones' sessions: 19 + 19
		// errors, both passes within them.
		{"greylisting Postfix, shared", postfix, 40, 30, 10, 8, 2},
		{"greylisting, 20 RCPTs a session", limited, 30, 30, 30, 0, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fewestSessions(tc.l, tc.rcpts, tc.rejects, tc.grey, tc.retryReject); got != tc.want {
				t.Fatalf("%d sessions, want %d", got, tc.want)
			}
		})
	}
}

// TestLimitsFloorCounts: what the fewest count reads from a world: a
// greylisted catch-all probe asked twice, a policy refusal never
// greylisted, one host of several equal ones enough; and the fewest of
// plans that end by the floor.
func TestLimitsFloorCounts(t *testing.T) {
	doms := []mailworld.Domain{
		{Name: "grey.test", Greylist: time.Minute, Mailboxes: map[string]mailworld.Behaviour{"a": mailworld.Exists},
			SoftErrors: 10, HardErrors: 20, ErrorSleep: time.Second},
		{Name: "policy.test", Greylist: time.Minute, PolicyReject: true},
		{Name: "big.test", MXHosts: 3, EqualPrefs: true, Mailboxes: map[string]mailworld.Behaviour{"a": mailworld.Exists}},
	}
	var rows []string
	for range 10 {
		rows = append(rows, "a@grey.test", "b@grey.test", "a@policy.test", "a@big.test")
	}
	f := computeLimitsFloor(doms, rows, 1)
	for key, want := range map[string]groupLeast{
		// 20 first asks and the probe: 21 errors (2 sessions); their
		// retries, 10 unknown and the probe refused: 1. By the floor,
		// which this host sets, no session may sleep: 3 and 2.
		"grey.test":   {least: 3, atFloor: 5, what: "error sleeps, greylisting", rcpts: 42, rejects: 32},
		"policy.test": {least: 1, atFloor: 1, what: "sessions", rcpts: 11, rejects: 11},
		"big.test":    {least: 1, atFloor: 1, what: "sessions", rcpts: 11, rejects: 1},
	} {
		if got := f.perGroup[key]; got != want {
			t.Errorf("%s: %+v, want %+v", key, got, want)
		}
	}
	if f.least != 5 || f.atFloor != 7 {
		t.Errorf("fewest %d, by the floor %d; want 5 and 7", f.least, f.atFloor)
	}
}

// TestReputationFloor: unknowns within what the identities may send cost
// nothing; past that, the addresses after each identity's last free
// unknown are answered a delay late, in its sessions at once.
func TestReputationFloor(t *testing.T) {
	karma := &mailworld.Domain{Name: "karma.test", ReputationDelay: time.Second, ReputationAfter: 2, ClientConns: 2}
	unlimited := &mailworld.Domain{Name: "k1.test", ReputationDelay: time.Second}
	one := 100 * time.Millisecond
	for _, tc := range []struct {
		name                        string
		d                           *mailworld.Domain
		rcpts, unknowns, identities int
		want                        time.Duration
	}{
		{"no reputation", &mailworld.Domain{Name: "plain.test"}, 100, 50, 1, 0},
		{"within one identity", karma, 100, 2, 1, 0},
		// 100 addresses, 10 unknown: 20 on time, 80 late, 40 a session.
		{"past one identity", karma, 100, 10, 1, one + 43*time.Second},
		{"within three identities", karma, 100, 6, 3, 0},
		// 60 on time, 40 late over 6 sessions: 7 a session.
		{"past three identities", karma, 100, 10, 3, one + 10*time.Second},
		// Bad from the first unknown, sessions without limit: one an address.
		{"no connection limit", unlimited, 100, 10, 1, one + 4*time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := reputationFloor(tc.d, tc.rcpts, tc.unknowns, tc.identities, one); got != tc.want {
				t.Fatalf("%v, want %v", got, tc.want)
			}
		})
	}
}
