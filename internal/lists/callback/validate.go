package callback

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxURLLength is the longest callback_url accepted, in characters. It keeps
// stored resources small and should match any CRD maxLength on the field.
const MaxURLLength = 512

// ValidateURL checks a callback URL at submission time so users get precise
// feedback early: http or https only, at most MaxURLLength characters, a host
// present, no user info (credentials do not belong in stored resources), and
// a port, if given, in 1–65535. An IP-literal host must be allowed by the
// policy. Host names are only checked syntactically and are NOT resolved:
// resolution happens at dial time, where the Client re-checks every address.
// Numeric shorthands such as "2130706433" or "0x7f.1", which some resolvers
// interpret as IPv4 addresses, are rejected.
//
// Errors are safe to show to users and are classified as permanent by
// IsPermanent.
func (p Policy) ValidateURL(raw string) error {
	u, err := parseCallbackURL(raw)
	if err != nil {
		return err
	}
	if addr, ok := hostAddr(u.Hostname()); ok && !p.Allowed(addr) {
		return invalidURLf("callback_url must not point at a loopback, link-local or private address (%s)", addr.WithZone(""))
	}
	return nil
}

// invalidURLError is a user-facing validation failure; never worth retrying.
type invalidURLError struct{ msg string }

func (e *invalidURLError) Error() string   { return e.msg }
func (e *invalidURLError) Permanent() bool { return true }

func invalidURLf(format string, args ...any) error {
	return &invalidURLError{msg: fmt.Sprintf(format, args...)}
}

// parseCallbackURL performs every check of ValidateURL that does not depend
// on a Policy. Deliver uses it too, leaving address checks to the dialer.
func parseCallbackURL(raw string) (*url.URL, error) {
	if strings.TrimSpace(raw) == "" {
		return nil, invalidURLf("callback_url must not be empty")
	}
	if utf8.RuneCountInString(raw) > MaxURLLength {
		return nil, invalidURLf("callback_url is longer than %d characters", MaxURLLength)
	}
	u, err := url.Parse(raw)
	if err != nil {
		// Report only the inner error: *url.Error repeats the whole URL.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, invalidURLf("callback_url is not a valid URL: %v", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, invalidURLf("callback_url must use http or https")
	}
	if u.User != nil {
		return nil, invalidURLf("callback_url must not contain user info (credentials)")
	}
	host := u.Hostname()
	if u.Opaque != "" || host == "" {
		return nil, invalidURLf("callback_url must include a host")
	}
	if port := u.Port(); port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return nil, invalidURLf("callback_url port must be between 1 and 65535")
		}
	}
	if _, ok := hostAddr(host); ok {
		return u, nil
	}
	if err := checkHostName(host); err != nil {
		return nil, err
	}
	return u, nil
}

// hostAddr parses a URL host (as returned by url.URL.Hostname) as a canonical
// IP literal.
func hostAddr(host string) (netip.Addr, bool) {
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, false
	}
	return addr, true
}

// checkHostName accepts ASCII DNS names (letters, digits, '-', '_', with an
// optional trailing dot) and rejects names whose last label is numeric. No
// real top-level domain is numeric, but resolvers built on inet_aton map
// such names ("2130706433", "0x7f.1", "0177.0.0.1", "127.1") to IPv4
// addresses, so they are a classic way to smuggle in 127.0.0.1.
func checkHostName(host string) error {
	name := strings.TrimSuffix(host, ".")
	if name == "" || len(name) > 253 {
		return invalidURLf("callback_url host %q is not a valid DNS name", host)
	}
	labels := strings.Split(name, ".")
	for _, label := range labels {
		if !validLabel(label) {
			return invalidURLf("callback_url host %q is not a valid DNS name", host)
		}
	}
	if numericLabel(labels[len(labels)-1]) {
		return invalidURLf("callback_url host %q is not a valid host name or canonical IP address", host)
	}
	return nil
}

func validLabel(label string) bool {
	if label == "" || len(label) > 63 {
		return false
	}
	for i := 0; i < len(label); i++ {
		c := label[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_':
		case c == '-' && i != 0 && i != len(label)-1:
		default:
			return false
		}
	}
	return true
}

// numericLabel reports whether label is decimal digits or a 0x hex number,
// i.e. something inet_aton would read as (part of) an IPv4 address.
func numericLabel(label string) bool {
	digits := label
	hex := false
	if len(label) >= 2 && label[0] == '0' && (label[1] == 'x' || label[1] == 'X') {
		digits, hex = label[2:], true
	}
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		isDigit := '0' <= c && c <= '9'
		isHex := hex && ('a' <= c && c <= 'f' || 'A' <= c && c <= 'F')
		if !isDigit && !isHex {
			return false
		}
	}
	return true
}
