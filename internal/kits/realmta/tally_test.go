package realmta

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// What a session's dialogue counts, in every server's log alike: commands,
// RCPTs a transaction (a new MAIL or RSET starts one), RCPT replies, 5xx
// refusals a session.
func TestSMTPTally(t *testing.T) {
	for _, tc := range []struct {
		name   string
		dialog []string // "C: command" or "S: code"
		want   HostCounts
	}{
		{"two transactions", []string{"C: EHLO x", "S: 250", "C: MAIL FROM:<a@b>", "S: 250", "C: RCPT TO:<c@d>", "S: 250",
			"C: rcpt to:<e@d>", "S: 550", "C: RSET", "S: 250", "C: MAIL FROM:<a@b>", "S: 250", "C: RCPT TO:<f@d>", "S: 452"},
			HostCounts{MAIL: 2, RSET: 1, RCPT: 3, RCPTAccepted: 1, MaxTxnRCPT: 2, MaxRejected: 1, Rejects: map[string]int{"550": 1, "452": 1}}},
		{"refusals a session, not a transaction", []string{"C: MAIL FROM:<>", "S: 250", "C: RCPT TO:<a@d>", "S: 550",
			"C: RSET", "S: 250", "C: MAIL FROM:<>", "S: 250", "C: RCPT TO:<b@d>", "S: 550"},
			HostCounts{MAIL: 2, RSET: 1, RCPT: 2, MaxTxnRCPT: 1, MaxRejected: 2, Rejects: map[string]int{"550": 2}}},
		{"a reply to no RCPT", []string{"S: 220", "C: NOOP", "S: 250"}, HostCounts{Rejects: map[string]int{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hc := HostCounts{Rejects: map[string]int{}}
			var s smtpTally
			for _, l := range tc.dialog {
				if cmd, ok := strings.CutPrefix(l, "C: "); ok {
					s.command(&hc, cmd)
				} else {
					s.reply(&hc, strings.TrimPrefix(l, "S: "))
				}
			}
			if !reflect.DeepEqual(hc, tc.want) {
				t.Fatalf("counted %+v, want %+v", hc, tc.want)
			}
		})
	}
}

// sendmail's throttle sleeps before every RCPT once a transaction has had
// its limit of refused ones (4xx too); a new transaction starts again. The
// kit's probe session is left out.
func TestSendmailCountsThrottle(t *testing.T) {
	log := strings.Join([]string{
		"100 >>> 220 mx ESMTP",
		"100 <<< NOOP " + probeMark,
		"100 >>> 250 ok",
		"101 >>> 220 mx ESMTP",
		"101 <<< MAIL FROM:<>",
		"101 >>> 250 ok",
		"101 <<< RCPT TO:<a@d>",
		"101 >>> 550 5.1.1 unknown",
		"101 <<< RCPT TO:<b@d>",
		"101 >>> 452 4.5.3 Too many recipients",
		"101 <<< RCPT TO:<c@d>", // the third, after 2 refused: throttled
		"101 >>> 250 ok",
		"101 <<< RSET",
		"101 >>> 250 ok",
		"101 <<< MAIL FROM:<>",
		"101 >>> 250 ok",
		"101 <<< RCPT TO:<e@d>", // a new transaction: not throttled
		"101 >>> 250 ok",
		"101 <<< QUIT",
		"101 >>> 221 bye",
	}, "\n") + "\n"
	path := filepath.Join(t.TempDir(), "sendmail.log")
	if err := os.WriteFile(path, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	hc := HostCounts{Rejects: map[string]int{}}
	if err := sendmailCounts(path, &hc, 2); err != nil {
		t.Fatal(err)
	}
	want := HostCounts{Sessions: 1, Disconnects: 1, MAIL: 2, RSET: 1, RCPT: 4, RCPTAccepted: 2, MaxTxnRCPT: 3, MaxRejected: 1,
		Throttled: 1, Rejects: map[string]int{"550": 1, "452": 1}}
	if !reflect.DeepEqual(hc, want) {
		t.Fatalf("counted %+v, want %+v", hc, want)
	}
}
