package realmta

import (
	"strings"

	"github.com/emaildata/emaildata/internal/kits/mailworld"
)

// Truth is what a perfect verifier reports for an address, derived from the
// configuration the world writes. Verdict and Underlying are mailworld's
// Truth* categories, so hack/compare scores both worlds alike.
type Truth struct {
	// Verdict: mailworld.TruthGreylisted when the host greylists the
	// address first; otherwise as Underlying.
	Verdict string
	// Underlying is the verdict once greylisting was waited out.
	Underlying string
	Domain     string
	Shape      DNSShape
	Host       string // the serving host, "" when no host serves the domain
	Kind       string // the host's behaviour (Host.Kind)
}

// Kind names a host's behaviour for reports: "postfix",
// "postfix+postgrey", "postfix+anvil-rate", "postfix+anvil-conns",
// "postfix+postscreen", "postfix+rcpt-limit", "postfix+tarpit",
// "postfix+hangup" (combinations joined by "+"), "exim" or "down";
// "sendmail" and "haraka" with their limits joined the same way
// ("sendmail+rcpt-limit+bad-rcpt-throttle+conn-rate+conns",
// "haraka+karma+rcpt-limit+conn-rate+conns+errors").
func (h Host) Kind() string {
	switch h.Software {
	case Sendmail, Haraka:
		k := string(h.Software)
		for _, f := range []struct {
			on  bool
			tag string
		}{
			{h.Karma, "karma"}, {h.RecipientLimit > 0, "rcpt-limit"}, {h.BadRcptThrottle > 0, "bad-rcpt-throttle"},
			{h.ConnRateLimit > 0, "conn-rate"}, {h.ConnCountLimit > 0, "conns"}, {h.ErrorLimit > 0, "errors"},
		} {
			if f.on {
				k += "+" + f.tag
			}
		}
		return k
	case Postfix:
	default:
		return string(h.Software)
	}
	k := "postfix"
	if h.Greylist {
		k += "+postgrey"
	}
	if h.ConnRateLimit > 0 {
		k += "+anvil-rate"
	}
	if h.ConnCountLimit > 0 {
		k += "+anvil-conns"
	}
	if h.Postscreen {
		k += "+postscreen"
	}
	if h.RecipientLimit > 0 {
		k += "+rcpt-limit"
	}
	if h.Tarpit > 0 {
		k += "+tarpit"
	}
	if h.HangUp > 0 {
		k += "+hangup"
	}
	return k
}

// silent: the host never sends a byte (to a verifier whose greeting
// timeout is shorter than a Tarpit host's silence).
func (h Host) silent() bool { return h.Software == Down || h.Tarpit > 0 || h.HangUp > 0 }

// Truth returns the ground truth of address (trimmed of surrounding white
// space; local parts compare case-insensitively, as Postfix's and Exim's
// lookups do). Domains the world does not declare are NXDOMAIN. A host
// that never sends a byte (Down, HangUp, and Tarpit for a verifier that
// gives up on the greeting sooner) gives mailworld.TruthTimeout.
func (w *World) Truth(address string) Truth {
	a := strings.ToLower(strings.TrimSpace(address))
	at := strings.LastIndexByte(a, '@')
	if at <= 0 || at == len(a)-1 || strings.Count(a, "@") != 1 {
		return Truth{Verdict: mailworld.TruthInvalid, Underlying: mailworld.TruthInvalid}
	}
	local, domain := a[:at], strings.TrimSuffix(a[at+1:], ".")
	var d *Domain
	for i := range w.Domains {
		if w.Domains[i].Name == domain {
			d = &w.Domains[i]
			break
		}
	}
	t := Truth{Domain: domain, Shape: ShapeNXDomain}
	set := func(v string) Truth { t.Verdict, t.Underlying = v, v; return t }
	if d == nil {
		return set(mailworld.TruthNXDomain)
	}
	t.Shape = d.Shape
	switch d.Shape {
	case ShapeNXDomain:
		return set(mailworld.TruthNXDomain)
	case ShapeNullMX:
		return set(mailworld.TruthNullMX)
	case ShapeNoAddress:
		return set(mailworld.TruthNoAddress)
	}
	var h Host
	for _, x := range w.Hosts {
		if x.Name == d.Host {
			h = x
		}
	}
	t.Host, t.Kind = h.Name, h.Kind()
	if h.silent() {
		// No byte ever comes: "no answer", however the connection ends.
		return set(mailworld.TruthTimeout)
	}
	// The order of the host's checks: check_recipient_access (which looks
	// up user@domain before domain: a full mailbox, then a policy
	// domain), then the mailbox lookup, then postgrey.
	switch {
	case contains(d.Full, local):
		return set(mailworld.TruthFull)
	case d.Policy:
		return set(mailworld.TruthPolicy)
	case d.CatchAll:
		set(mailworld.TruthCatchAll)
	case contains(d.Mailboxes, local):
		set(mailworld.TruthDeliverable)
	default:
		return set(mailworld.TruthMissing)
	}
	if h.Greylist {
		t.Verdict = mailworld.TruthGreylisted
	}
	return t
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
