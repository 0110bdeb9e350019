package smtpprobe

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/emaildata/emaildata/internal/kits/simtime"
)

func TestReadReply(t *testing.T) {
	for _, tc := range []struct {
		in         string
		code       int
		enh, text  string
		last       string
		err        error
		afterFirst string // what the next reply reads as, if any
	}{
		{in: "250 2.1.5 Ok\r\n", code: 250, enh: "2.1.5", text: "2.1.5 Ok", last: "250 2.1.5 Ok"},
		{in: "220\r\n", code: 220, last: "220"},
		{in: "550 5.1.1 <a@b>: User unknown\n", code: 550, enh: "5.1.1", text: "5.1.1 <a@b>: User unknown", last: "550 5.1.1 <a@b>: User unknown"},
		{in: "250-mx.test Hello\r\n250-PIPELINING\r\n250-SIZE 100\r\n250 SMTPUTF8\r\n", code: 250, text: "mx.test Hello\nPIPELINING\nSIZE 100\nSMTPUTF8", last: "250 SMTPUTF8"},
		{in: "550-5.7.1 Blocked\r\n550-5.7.1 see http://x\r\n550 5.7.1 bye\r\n", code: 550, enh: "5.7.1", last: "550 5.7.1 bye"},
		{in: "451 4.7.1 Greylisted\r\n250 2.0.0 Ok\r\n", code: 451, enh: "4.7.1", last: "451 4.7.1 Greylisted", afterFirst: "250 2.0.0 Ok"},
		{in: "452 5.2.2 odd\r\n", code: 452, text: "5.2.2 odd", last: "452 5.2.2 odd"}, // class mismatch: no enhanced code
		{in: "550 5.1.1.1 x\r\n", code: 550, last: "550 5.1.1.1 x"},
		{in: "550 5.1234.1 x\r\n", code: 550, last: "550 5.1234.1 x"},
		{in: "250-a\r\n550 b\r\n", err: errProtocol},
		{in: "25O Ok\r\n", err: errProtocol},
		{in: "250_Ok\r\n", err: errProtocol},
		{in: "650 no\r\n", err: errProtocol},
		{in: "hello\r\n", err: errProtocol},
		{in: "250-a\r\n", err: io.EOF},
		{in: "250 trunc", err: io.ErrUnexpectedEOF},
		{in: "", err: io.EOF},
		{in: "250 " + strings.Repeat("x", maxReplyLine) + "\r\n", err: errProtocol},
		{in: strings.Repeat("250-x\r\n", maxReplyLines+1) + "250 x\r\n", err: errProtocol},
	} {
		br := bufio.NewReaderSize(strings.NewReader(tc.in), maxReplyLine)
		r, err := readReply(br)
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("%q: err %v, want %v", truncate(tc.in, 40), err, tc.err)
			}
			continue
		}
		if err != nil || r.code != tc.code || r.enh != tc.enh || r.last != tc.last || (tc.text != "" && r.text != tc.text) {
			t.Errorf("%q: got %+v %v", tc.in, r, err)
		}
		if tc.afterFirst != "" {
			if r2, err := readReply(br); err != nil || r2.last != tc.afterFirst {
				t.Errorf("%q: second reply %+v %v", tc.in, r2, err)
			}
		}
	}
}

func TestClassifyRcpt(t *testing.T) {
	for _, tc := range []struct {
		line string
		want rcptKind
		grey bool
	}{
		{"250 2.1.5 Ok", kindAccepted, false},
		{"251 2.1.5 User not local; will forward", kindAccepted, false},
		{"550 5.1.1 <a@b>: Recipient address rejected: User unknown", kindMissing, false},
		{"550 5.1.1 The email account that you tried to reach does not exist", kindMissing, false},
		{"553 5.1.3 bad address syntax", kindMissing, false},
		{"550 5.1.10 RESOLVER.ADR.RecipientNotFound", kindMissing, false},
		{"550 5.2.1 <a@b>: Mailbox disabled", kindMissing, false},
		{"550 User unknown", kindMissing, false},
		{"551 User not local", kindMissing, false},
		{"553 sorry, no mailbox here by that name", kindMissing, false},
		{"550 Requested action not taken", kindMissing, false},
		{"552 5.2.2 <a@b>: Mailbox full", kindFull, false},
		{"552 Requested mail action aborted: exceeded storage allocation", kindFull, false},
		{"550 5.2.2 quota exceeded", kindFull, false},
		{"550 mailbox full", kindFull, false},
		{"550 5.7.1 <a@b>: Recipient address rejected: Access denied by policy", kindPolicy, false},
		{"550 5.7.1 <a@b>: Relay access denied", kindPolicy, false},
		{"554 5.7.1 Service unavailable; Client host blocked using zen.spamhaus.org", kindPolicy, false},
		{"550 5.1.2 not accepted for this domain", kindPolicy, false},
		{"554 rejected", kindPolicy, false},
		{"550 Relaying denied", kindPolicy, false},
		{"553 sorry, that domain isn't in my list of allowed rcpthosts", kindPolicy, false},
		{"550 5.1.8 sender domain does not resolve", kindUnknown, false},
		{"501 5.5.4 Syntax: RCPT TO:<address>", kindUnknown, false},
		{"503 5.5.1 Error: need MAIL command", kindUnknown, false},
		{"500 command unrecognized", kindUnknown, false},
		{"451 4.7.1 <a@b>: Recipient address rejected: Greylisted, please try again later", kindTemporary, true},
		{"450 4.2.1 <a@b>: Mailbox temporarily unavailable", kindTemporary, false},
		{"450 4.7.1 Client host rejected: cannot find your hostname", kindTemporary, true},
		{"451 Temporary local problem - please try later", kindTemporary, true},
		{"421 4.7.0 mx Error: too many connections, try again later", kindTemporary, true},
		{"450 4.1.1 Recipient address rejected: unverified address", kindTemporary, false},
		{"452 4.5.3 Error: too many recipients", kindTooMany, false},
		{"452 too many recipients", kindTooMany, false}, // Exim: no enhanced code
		{"452 4.3.1 Insufficient system storage", kindTemporary, false},
		{"452 4.2.2 Mailbox full", kindTemporary, false},
		{"354 go ahead", kindUnknown, false},
	} {
		r, err := readReply(bufio.NewReader(strings.NewReader(tc.line + "\r\n")))
		if err != nil {
			t.Fatalf("%q: %v", tc.line, err)
		}
		if got := classifyRcpt(r); got != tc.want {
			t.Errorf("%q: %v, want %v", tc.line, got, tc.want)
		}
		if got := looksGreylisted(r); got != tc.grey {
			t.Errorf("%q: greylisted %v, want %v", tc.line, got, tc.grey)
		}
	}
}

func TestVerdictCache(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newVerdictCache(3, time.Minute, nil)
		for i := range 5 {
			c.put(fmt.Sprintf("d%d.test", i), i%2 == 0)
		}
		if c.len() != 3 {
			t.Fatalf("len %d, want 3", c.len())
		}
		if _, ok := c.get("d0.test"); ok {
			t.Fatal("oldest not evicted")
		}
		if v, ok := c.get("d2.test"); !ok || !v {
			t.Fatal("d2 missing")
		}
		c.put("d5.test", false) // evicts d3 (d2 was just used)
		if _, ok := c.get("d3.test"); ok {
			t.Fatal("LRU order ignored")
		}
		c.put("d2.test", false)
		if v, ok := c.get("d2.test"); !ok || v {
			t.Fatal("update ignored")
		}
		simtime.Advance(time.Minute)
		if _, ok := c.get("d2.test"); ok || c.len() != 2 {
			t.Fatalf("expired entry served (len %d)", c.len())
		}
		c.del("d4.test")
		if _, ok := c.get("d4.test"); ok {
			t.Fatal("del")
		}
	})
}

// Idle hosts with a full rate bucket are forgotten; busy ones are kept.
func TestHostSweep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(Config{RatePerHost: 1e6, MaxConnsPerHost: 1})
		p.mu.Lock()
		defer p.mu.Unlock()
		for i := range minSweep + 10 {
			q := p.host(fmt.Sprint(i))
			if i < 5 {
				q.sessions = 1 // busy
			}
		}
		simtime.Advance(time.Millisecond)
		p.host("new")
		if n := len(p.hosts); n > minSweep {
			t.Fatalf("%d hosts after sweep", n)
		}
		for i := range 5 {
			if p.hosts[fmt.Sprint(i)] == nil {
				t.Fatalf("busy host %d swept", i)
			}
		}
	})
}

// What a window's "452 too many recipients" teaches: the first one of a
// transaction is the lesson (a limit per transaction after earlier RCPTs
// of it, per session at the first RCPT of a later transaction); the 452s
// pipelined behind it only go again.
func TestTooManyLessons(t *testing.T) {
	r452 := reply{code: 452, enh: "4.5.3", text: "4.5.3 Error: too many recipients", last: "452 4.5.3 Error: too many recipients"}
	ok := reply{code: 250, enh: "2.0.0", text: "2.0.0 Ok", last: "250 2.0.0 Ok"}
	for _, tc := range []struct {
		name     string
		answered int  // RCPTs the session had answered before the window
		open     bool // the window continues an open transaction
		cmds     func(it []*item) []cmd
		want     HostState
		probeTx  bool
	}{
		{"per session, more pipelined behind", 5, false, func(it []*item) []cmd {
			return []cmd{{kind: cmdRSET, reply: ok}, {kind: cmdMAIL, reply: ok},
				{kind: cmdRCPT, it: it[0], txPos: 1, reply: r452}, {kind: cmdRCPT, it: it[1], txPos: 2, reply: r452}, {kind: cmdRCPT, it: it[2], txPos: 3, reply: r452}}
		}, HostState{RcptsPerSession: 5}, false},
		{"per transaction, first transaction", 2, true, func(it []*item) []cmd {
			return []cmd{{kind: cmdRCPT, it: it[0], txPos: 3, reply: r452}, {kind: cmdRCPT, it: it[1], txPos: 4, reply: r452}, {kind: cmdRCPT, it: it[2], txPos: 5, reply: r452}}
		}, HostState{RcptsPerTransaction: 2}, true},
		{"per transaction, a later transaction", 9, true, func(it []*item) []cmd {
			return []cmd{{kind: cmdRCPT, it: it[0], txPos: 3, reply: r452}, {kind: cmdRCPT, it: it[1], txPos: 4, reply: r452}, {kind: cmdRCPT, it: it[2], txPos: 5, reply: r452}}
		}, HostState{RcptsPerTransaction: 2}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := New(Config{})
			j := p.newJob(context.Background(), "d.test", nil, []string{"a@d.test", "b@d.test", "c@d.test"}, make([]Result, 3))
			s := &session{p: p, answered: tc.answered, inTx: tc.open}
			p.mu.Lock()
			defer p.mu.Unlock()
			q := p.host("127.0.0.1:25")
			w := windowReplies{p: p, q: q, s: s, txOK: tc.open}
			cmds := tc.cmds(j.items)
			w.read(cmds, len(cmds))
			if q.hs != tc.want || s.probeTx != tc.probeTx || len(w.back) != 3 {
				t.Fatalf("learnt %+v probeTx %v, %d to send again; want %+v probeTx %v, all 3", q.hs, s.probeTx, len(w.back), tc.want, tc.probeTx)
			}
		})
	}
}
