package smtpprobe

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

var updateDocs = flag.Bool("update-docs", false, "rewrite docs/smtp-replies.md from ReplyTable")

// parseReply reads one reply line as the prober does.
func parseReply(t *testing.T, line string) reply {
	t.Helper()
	r, err := readReply(bufio.NewReader(strings.NewReader(line + "\r\n")))
	if err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	return r
}

// Every row of ReplyTable: examples of what it looks like are classified
// into it by the function the engine classifies with, and the row itself
// is complete.
func TestReplyTableRows(t *testing.T) {
	type example struct {
		kind  cmdKind // the command answered; greeting/ehlo for those
		line  string  // the reply; empty for err
		err   error
		greet bool // a greeting (else EHLO/HELO when kind is cmdNone)
	}
	const cmdHello cmdKind = 255
	rows := map[ReplyClass][]example{
		ReplyOK:            {{kind: cmdMAIL, line: "250 2.1.0 Ok"}, {kind: cmdRSET, line: "250 2.0.0 Ok"}, {kind: cmdHello, greet: true, line: "220 mx ESMTP"}, {kind: cmdHello, line: "250 mx"}},
		ReplyAccepted:      {{kind: cmdRCPT, line: "250 2.1.5 Ok"}, {kind: cmdRCPT, line: "251 2.1.5 will forward"}},
		ReplyMissing:       {{kind: cmdRCPT, line: "550 5.1.1 <a@b>: User unknown"}, {kind: cmdRCPT, line: "550 5.2.1 Mailbox disabled"}, {kind: cmdRCPT, line: "550 Unrouteable address"}, {kind: cmdRCPT, line: "553 sorry"}},
		ReplyFull:          {{kind: cmdRCPT, line: "552 5.2.2 Mailbox full"}, {kind: cmdRCPT, line: "552 over quota"}},
		ReplyPolicy:        {{kind: cmdRCPT, line: "550 5.7.1 Relay access denied"}, {kind: cmdRCPT, line: "550 5.1.2 not accepted for this domain"}, {kind: cmdRCPT, line: "554 go away"}},
		ReplyUnknown:       {{kind: cmdRCPT, line: "501 5.5.4 Syntax"}, {kind: cmdRCPT, line: "550 5.1.8 bad sender domain"}},
		ReplyTooMany:       {{kind: cmdRCPT, line: "452 4.5.3 Too many recipients"}, {kind: cmdRCPT, line: "452 too many recipients"}},
		ReplyTemporary:     {{kind: cmdRCPT, line: "450 4.2.1 try later"}, {kind: cmdRCPT, line: "451 4.7.1 Greylisted"}, {kind: cmdRCPT, line: "452 4.2.2 over quota, try later"}},
		ReplyClosing:       {{kind: cmdRCPT, line: "421 4.3.2 shutting down"}, {kind: cmdMAIL, line: "421 busy"}, {kind: cmdHello, greet: true, line: "421 4.7.0 too many connections"}, {kind: cmdHello, greet: true, line: "421 connection rate limit exceeded"}},
		ReplyTooManyErrors: {{kind: cmdRCPT, line: "421 4.7.0 mx Error: too many errors"}, {kind: cmdRSET, line: "421 4.7.0 mx Error: too many errors"}},
		ReplyDeferred:      {{kind: cmdMAIL, line: "451 4.3.0 try later"}, {kind: cmdRSET, line: "450 busy"}, {kind: cmdHello, greet: true, line: "450 busy"}, {kind: cmdHello, line: "451 later"}},
		ReplyRefused:       {{kind: cmdMAIL, line: "550 5.7.1 sender refused"}, {kind: cmdHello, greet: true, line: "554 no service"}, {kind: cmdHello, line: "550 no HELO"}},
		ReplyNonmail:       {{kind: cmdRSET, line: "554 Too many nonmail commands"}},
		ReplyTimeout:       {{err: fmt.Errorf("read: %w", os.ErrDeadlineExceeded)}},
		ReplyHangup:        {{err: errors.New("EOF")}},
		ReplySlowed:        {{err: &slowedError{rejects: 9}}},
		ReplyProxyLost:     {{err: &proxyLostError{errors.New("socks5: gone")}}},
	}
	// Classes that are no reply to a command: a host that never sent a
	// byte (dial, helloFailed), a late group (sizeGroupLocked) and late
	// replies after unknown recipients (noteRepliesLocked).
	notReplies := map[ReplyClass]bool{ReplySilent: true, ReplyGroupLate: true, ReplyReputation: true}
	for i, rule := range ReplyTable {
		cl := ReplyClass(i)
		t.Run(rule.Name, func(t *testing.T) {
			if rule.Class != cl || rule.Name == "" || rule.When == "" || rule.Looks == "" || rule.Verdict == "" || rule.Then == "" {
				t.Fatalf("row %d incomplete or out of order: %+v", i, rule)
			}
			if rule.Next == NextSettle && !strings.Contains(rule.Verdict, fmt.Sprintf("%s (%d)", rule.Outcome, rule.Outcome.Code())) {
				t.Errorf("verdict %q does not name %s and its code %d", rule.Verdict, rule.Outcome, rule.Outcome.Code())
			}
			if len(rows[cl]) == 0 && !notReplies[cl] {
				t.Fatalf("no example for %s", rule.Name)
			}
			for _, ex := range rows[cl] {
				var got ReplyClass
				switch {
				case ex.err != nil:
					got = lostClass(ex.err)
				case ex.kind == cmdHello:
					got = greetingClass(parseReply(t, ex.line), ex.greet)
				default:
					got = commandClass(ex.kind, parseReply(t, ex.line))
				}
				if got != cl {
					t.Errorf("%q %v: class %s, want %s", ex.line, ex.err, got, rule.Name)
				}
			}
		})
	}
}

// The RCPT rows, end to end: a server answering each row's reply gets
// the row's verdict from the engine.
func TestReplyTableVerdicts(t *testing.T) {
	for _, tc := range []struct {
		cl   ReplyClass
		line string
		want Outcome // the verdict after the row's Next
	}{
		{ReplyAccepted, "250 2.1.5 Ok", Deliverable}, // the catch-all probe is refused
		{ReplyMissing, "550 5.1.1 unknown", Missing},
		{ReplyFull, "552 5.2.2 full", Full},
		{ReplyPolicy, "550 5.7.1 denied by policy", Policy},
		{ReplyUnknown, "501 5.5.4 bad syntax", Unconfirmed},
		{ReplyTemporary, "450 4.2.1 later", Unconfirmed}, // its retries ran out
		{ReplyTooMany, "452 4.5.3 too many recipients", Deliverable},
	} {
		t.Run(tc.cl.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// ok@ goes first in the transaction; x@ gets the row's reply
				// (a "452" once: the next transaction takes it).
				xs := 0
				f := newFake(t, func(f *fakeSMTP) {
					f.rcpt = func(session, n int, rcpt string) string {
						switch {
						case strings.HasPrefix(rcpt, "ok@"):
							return "250 2.1.5 Ok"
						case !strings.HasPrefix(rcpt, "x@"):
							return "550 5.1.1 unknown" // the catch-all probe
						}
						if xs++; tc.cl == ReplyTooMany && xs > 1 {
							return "250 2.1.5 Ok"
						}
						return tc.line
					}
				})
				p, mx := fakeProber(t, nil, f)
				res := make([]Result, 2)
				if err := p.ProbeBatch(context.Background(), "fake.test", mx, []string{"ok@fake.test", "x@fake.test"}, res); err != nil {
					t.Fatal(err)
				}
				r := res[1]
				if r.Outcome != tc.want {
					t.Errorf("%s: %v %q %v, want %v", tc.line, r.Outcome, r.Reply, r.Err, tc.want)
				}
				if rule := tc.cl.Rule(); rule.Next == NextSettle && rule.Outcome != tc.want && tc.cl != ReplyAccepted {
					t.Errorf("row says %v", rule.Outcome)
				}
				if tc.cl == ReplyTemporary && !r.Greylisted && p.Stats().Deferred != uint64(p.Config().MaxGreylistRetries) {
					t.Errorf("deferred %d times, want %d", p.Stats().Deferred, p.Config().MaxGreylistRetries)
				}
				// Transactions: ok@ and x@ (452: a limit of 1), x@ alone,
				// then the catch-all probe, all in one session.
				if tc.cl == ReplyTooMany && (f.count("MAIL") != 3 || f.nSessions() != 1) {
					t.Errorf("%d transactions in %d sessions, want x@ in the second of the same session", f.count("MAIL"), f.nSessions())
				}
			})
		})
	}
}

// docs/smtp-replies.md is ReplyTable rendered: fresh, or rewritten with
// -update-docs.
func TestReplyTableDoc(t *testing.T) {
	path := filepath.Join("..", "..", "..", "docs", "smtp-replies.md")
	want := ReplyTableMarkdown()
	if *updateDocs {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("%s is stale: run go test ./internal/engine/smtpprobe -run TestReplyTableDoc -update-docs", path)
	}
}

// Time-outs in the table are the Config's defaults.
func TestReplyTableTimeouts(t *testing.T) {
	c := DefaultConfig()
	if c.CommandTimeout != rfcReplyTimeout || rfcReplyTimeout != 5*time.Minute || c.GreetingTimeout != 30*time.Second {
		t.Fatalf("CommandTimeout %v, GreetingTimeout %v: the table says 5m and 30s", c.CommandTimeout, c.GreetingTimeout)
	}
}
