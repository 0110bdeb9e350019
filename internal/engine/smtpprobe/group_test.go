package smtpprobe

import (
	"testing"
	"time"
)

// window builds a window's commands from a pattern: M (MAIL), R (RSET),
// a (an accepted RCPT), x (a refused one).
func window(pattern string) []cmd {
	var out []cmd
	for _, ch := range pattern {
		switch ch {
		case 'M':
			out = append(out, cmd{kind: cmdMAIL})
		case 'R':
			out = append(out, cmd{kind: cmdRSET})
		case 'a':
			out = append(out, cmd{kind: cmdRCPT})
		case 'x':
			out = append(out, cmd{kind: cmdRCPT, counted: true})
		}
	}
	return out
}

// Where a throttle started, from a window's replies and how late it came.
func TestThrottleStart(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pattern string
		carried int
		late    time.Duration
		want    int
	}{
		{"on time", "Maxaxaaxax", 0, 100 * time.Millisecond, 0},
		// The slow MTA's first group: 4 refused; a second before each of
		// the 3 replies after the third refusal.
		{"3 late replies after the third refusal", "Maxaxaaxaxa", 0, 3 * time.Second, 3},
		// Late by one second: the reply after the fourth refusal only.
		{"1 late reply after the fourth refusal", "Maxaxaaxaxa", 0, time.Second, 4},
		// No refusal was followed by another RCPT: nothing to blame.
		{"late, refusal last", "Maaaax", 0, 3 * time.Second, 0},
		{"late, no refusal", "Maaaa", 0, 3 * time.Second, 0},
		// Refusals carried from the open transaction's earlier windows:
		// both replies followed 2 of them; a throttle at 1 would explain
		// no more than one at 2.
		{"carried refusals", "aa", 2, 1500 * time.Millisecond, 2},
		// A new transaction starts the count again. Replies after 1
		// refusal of their transaction: 3, after 2: 1. Late by 2s, three
		// held replies would be shorter than slowReplyGap each: 2; late by
		// 3s, 1.
		{"two transactions, 2s", "MxxaRMaxa", 0, 2 * time.Second, 2},
		{"two transactions, 3s", "MxxaRMaxa", 0, 3 * time.Second, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := throttleStart(window(tc.pattern), tc.carried, tc.late); got != tc.want {
				t.Errorf("throttleStart(%s, %d, %v) = %d, want %d", tc.pattern, tc.carried, tc.late, got, tc.want)
			}
		})
	}
}

// A host's group: grows by what it answers, halves when late after
// refusals (learning the throttle), and only where slow replies mean a
// budget (not at Exim or Exchange).
func TestSizeGroup(t *testing.T) {
	for _, tc := range []struct {
		name      string
		rules     serverRules
		pattern   string
		rtt       time.Duration
		exempt    int
		wantGroup int
		wantCap   int
	}{
		{"grows by the answers", rulesFor(otherServer), "Maaxaaaaxaa", 20 * time.Millisecond, 1, 20, 0},
		{"capped at PipelineDepth", rulesFor(otherServer), "M" + repeat('a', 45), 20 * time.Millisecond, 1, 50, 0},
		{"late after refusals: halved", rulesFor(otherServer), "Maxaxaaxaxa", 3 * time.Second, 1, 5, 3},
		{"a flow-control pause is on time", rulesFor(otherServer), "Maxaxaaxaxa", time.Second + 10*time.Millisecond, 1, 20, 0},
		{"late at Exim: not a budget", rulesFor(eximServer), "Maxaxaaxaxa", 3 * time.Second, 1, 20, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := New(Config{})
			q := &hostQ{key: "h"}
			s := &session{p: p, rules: tc.rules, pipelining: true, group: p.groupLocked(q), helloRTT: 10 * time.Millisecond,
				rtt: tc.rtt, exempt: tc.exempt}
			p.sizeGroupLocked(q, s, window(tc.pattern), 0)
			if q.group != tc.wantGroup || s.group != tc.wantGroup || s.txRejCap != tc.wantCap || q.hs.RejectsPerTransaction != tc.wantCap {
				t.Errorf("group %d (session %d), throttle %d (learnt %d); want group %d, throttle %d",
					q.group, s.group, s.txRejCap, q.hs.RejectsPerTransaction, tc.wantGroup, tc.wantCap)
			}
		})
	}
}

func repeat(c byte, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = c
	}
	return string(b)
}
