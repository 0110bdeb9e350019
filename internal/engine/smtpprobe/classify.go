package smtpprobe

import "strings"

// rcptKind is what an RCPT TO reply says about the recipient.
type rcptKind int

const (
	kindAccepted  rcptKind = iota // 2xx
	kindMissing                   // mailbox unknown or disabled
	kindFull                      // over quota
	kindPolicy                    // refused by policy / for the domain
	kindTemporary                 // 4xx: retry later
	kindTooMany                   // 452 too many recipients: the host's limit, not the address's
	kindUnknown                   // anything else (5xx to our own syntax, odd codes)
)

var kindNames = [...]string{"accepted", "missing", "full", "policy", "temporary", "toomany", "unknown"}

func (k rcptKind) String() string { return kindNames[k] }

// Text fragments, matched on the lower-cased reply text.
var (
	userUnknownTexts = []string{
		"user unknown", "unknown user", "no such user", "no such mailbox", "no such recipient",
		"unknown recipient", "recipient unknown", "invalid recipient", "recipient not found",
		"mailbox not found", "mailbox unavailable", "mailbox does not exist", "does not exist",
		"doesn't exist", "not exist", "address unknown", "unknown address", "user not found",
		"account disabled", "mailbox disabled", "no mailbox", "not a valid mailbox", "invalid mailbox",
		"undeliverable address", "unrouteable address",
	}
	fullTexts   = []string{"mailbox full", "over quota", "quota exceeded", "exceeded storage", "insufficient storage"}
	policyTexts = []string{
		"relay", "not accepted for this domain", "policy", "blocked", "blacklist", "blocklist",
		"spamhaus", "rcpthosts", "access denied", "not permitted", "not allowed", "denied", "prohibited",
	}
)

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// classifyRcpt maps an RCPT TO reply to a kind. Enhanced status codes win
// over the basic code; texts decide when neither is specific.
func classifyRcpt(r reply) rcptKind {
	switch r.class() {
	case 2:
		return kindAccepted
	case 4:
		if r.code == 452 && (r.enh == "4.5.3" || (r.enh == "" && strings.Contains(strings.ToLower(r.text), "too many recipients"))) {
			// Postfix and Exchange say "452 4.5.3"; Exim says "452 too
			// many recipients" (recipients_max), without an enhanced code.
			return kindTooMany
		}
		return kindTemporary
	case 5:
	default:
		return kindUnknown
	}
	switch subject, detail := enhParts(r.enh); subject {
	case "1":
		switch detail {
		case "1", "0", "3", "6", "10": // bad mailbox, other address status, syntax, moved, null MX
			return kindMissing
		case "2": // bad destination system: this host does not take the domain
			return kindPolicy
		}
		// 5.1.7/5.1.8 are about our sender: no verdict on the recipient.
		return kindUnknown
	case "2":
		switch detail {
		case "1":
			return kindMissing // disabled: cannot receive (code 400)
		case "2":
			return kindFull
		}
	case "7":
		return kindPolicy
	case "5":
		return kindUnknown // our protocol error
	}
	text := strings.ToLower(r.text)
	switch {
	case containsAny(text, fullTexts):
		return kindFull
	case containsAny(text, userUnknownTexts):
		return kindMissing
	case containsAny(text, policyTexts):
		return kindPolicy
	}
	switch r.code {
	case 550, 551, 553:
		return kindMissing
	case 552:
		return kindFull
	case 554:
		return kindPolicy
	}
	return kindUnknown
}

// provesNoCatchAll reports whether a rejection says the mailbox does not
// exist, so that the domain is no catch-all: 5.1.1 ("bad destination
// mailbox address", RFC 3463), or without an enhanced code a 550 whose
// text says the user is unknown (Exim's "Unrouteable address"). Disabled
// mailboxes (5.2.1) and address syntax errors prove nothing: a catch-all
// domain may have those.
func provesNoCatchAll(r reply) bool {
	if r.enh != "" {
		return r.enh == "5.1.1"
	}
	text := strings.ToLower(r.text)
	return r.code == 550 && containsAny(text, unknownUserTexts) && !strings.Contains(text, "disabled")
}

// unknownUserTexts are the user-unknown texts that name a local part the
// domain does not have.
var unknownUserTexts = []string{
	"user unknown", "unknown user", "no such user", "no such mailbox", "no such recipient", "unknown recipient",
	"recipient unknown", "recipient not found", "mailbox not found", "mailbox does not exist", "user not found",
	"unrouteable address",
}

// enhParts returns the subject and detail of an enhanced status code.
func enhParts(enh string) (subject, detail string) {
	if enh == "" {
		return "", ""
	}
	rest := enh[2:]
	subject, detail, _ = strings.Cut(rest, ".")
	return subject, detail
}

// looksGreylisted reports whether a 4xx reply reads like greylisting (or
// another "come back later" deferral) rather than a mailbox problem.
func looksGreylisted(r reply) bool {
	if r.class() != 4 {
		return false
	}
	text := strings.ToLower(r.text)
	if strings.Contains(text, "grey") || strings.Contains(text, "gray") {
		return true
	}
	subject, _ := enhParts(r.enh)
	switch {
	case subject == "7":
		return true
	case r.enh == "":
		return r.code == 450 || r.code == 451 || r.code == 421
	}
	return false
}
