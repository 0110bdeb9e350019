package callback

import (
	"fmt"
	"net/netip"
	"strings"
)

// Policy decides which destination addresses callbacks may connect to.
//
// The zero Policy forbids every loopback, link-local, private and otherwise
// reserved address (see Allowed) and permits public unicast addresses.
//
// The policy is deliberately address-based only: there is no host-name allow
// list, because a host name says nothing about where a connection ends up
// (anyone controlling DNS for an allowed name could point it at 127.0.0.1 or
// the cloud metadata service). To reach an in-cluster receiver, allow its
// address range instead.
type Policy struct {
	// AllowCIDRs opens ranges that are otherwise forbidden, e.g. in-cluster
	// receivers ("10.0.0.0/8") or tests ("127.0.0.0/8"). An address inside
	// any of these prefixes is always allowed.
	AllowCIDRs []netip.Prefix
}

// ParsePolicy builds a Policy from a comma-separated list of CIDRs, the form
// used by flags and environment variables. Blank input and blank entries are
// ignored. A bare address is accepted as a single-host prefix (/32 or /128).
// Prefixes with host bits set (e.g. "10.0.0.1/8") are rejected rather than
// silently widened, and errors name the offending entry.
func ParsePolicy(cidrs string) (Policy, error) {
	var p Policy
	for _, entry := range strings.Split(cidrs, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		prefix, err := parseAllowEntry(entry)
		if err != nil {
			return Policy{}, err
		}
		p.AllowCIDRs = append(p.AllowCIDRs, prefix)
	}
	return p, nil
}

func parseAllowEntry(entry string) (netip.Prefix, error) {
	var prefix netip.Prefix
	if strings.Contains(entry, "/") {
		pr, err := netip.ParsePrefix(entry)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("invalid allowed CIDR %q: not a valid CIDR prefix", entry)
		}
		if pr.Masked() != pr {
			return netip.Prefix{}, fmt.Errorf("invalid allowed CIDR %q: host bits are set (did you mean %s?)", entry, pr.Masked())
		}
		prefix = pr
	} else {
		addr, err := netip.ParseAddr(entry)
		if err != nil || addr.Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("invalid allowed CIDR %q: not a valid CIDR prefix or IP address", entry)
		}
		prefix = netip.PrefixFrom(addr, addr.BitLen())
	}
	// Store IPv4-mapped IPv6 prefixes in their IPv4 form so they match the
	// unmapped addresses Allowed compares against.
	if a := prefix.Addr(); a.Is4In6() && prefix.Bits() >= 96 {
		prefix = netip.PrefixFrom(a.Unmap(), prefix.Bits()-96)
	}
	return prefix, nil
}

// String renders the allow list in the form ParsePolicy accepts, for logs.
func (p Policy) String() string {
	parts := make([]string, len(p.AllowCIDRs))
	for i, pr := range p.AllowCIDRs {
		parts[i] = pr.String()
	}
	return strings.Join(parts, ",")
}

// Allowed reports whether a callback may connect to addr.
//
// Forbidden by default (unless inside AllowCIDRs) are: unspecified, loopback,
// link-local (including the 169.254.169.254 metadata endpoint), private
// (RFC 1918, fc00::/7), CGNAT 100.64.0.0/10, 0.0.0.0/8, multicast, broadcast
// and the reserved 240.0.0.0/4, IETF special-purpose, documentation and
// benchmarking ranges, the deprecated fec0::/10 site-local and ::/8 ranges,
// and 64:ff9b:1::/48 local-use NAT64. IPv4-mapped IPv6 addresses are
// unmapped first. Addresses that embed an IPv4 address — NAT64 64:ff9b::/96,
// 6to4 2002::/16 and Teredo 2001::/32 — are allowed only if every embedded
// IPv4 address is allowed. IPv6 zones are ignored. The invalid zero Addr is
// never allowed.
func (p Policy) Allowed(addr netip.Addr) bool {
	if !addr.IsValid() {
		return false
	}
	addr = addr.WithZone("")
	if p.allowListed(addr) {
		return true
	}
	return !p.forbidden(addr)
}

func (p Policy) allowListed(addr netip.Addr) bool {
	unmapped := addr.Unmap()
	mapped := netip.AddrFrom16(unmapped.As16())
	for _, pr := range p.AllowCIDRs {
		if pr.Contains(unmapped) || pr.Contains(mapped) {
			return true
		}
	}
	return false
}

func (p Policy) forbidden(addr netip.Addr) bool {
	addr = addr.Unmap()
	if addr.Is4() {
		return containsAny(forbiddenV4, addr)
	}
	if embedded := embeddedIPv4(addr); len(embedded) > 0 {
		for _, e := range embedded {
			if !p.Allowed(e) {
				return true
			}
		}
		return false
	}
	return containsAny(forbiddenV6, addr)
}

func containsAny(prefixes []netip.Prefix, addr netip.Addr) bool {
	for _, pr := range prefixes {
		if pr.Contains(addr) {
			return true
		}
	}
	return false
}

var (
	nat64WellKnown = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour      = netip.MustParsePrefix("2002::/16")
	teredo         = netip.MustParsePrefix("2001::/32")
)

// embeddedIPv4 returns the IPv4 addresses that traffic to an IPv6 transition
// address is ultimately delivered to (or relayed via).
func embeddedIPv4(addr netip.Addr) []netip.Addr {
	b := addr.As16()
	switch {
	case nat64WellKnown.Contains(addr):
		return []netip.Addr{netip.AddrFrom4([4]byte(b[12:16]))}
	case sixToFour.Contains(addr):
		return []netip.Addr{netip.AddrFrom4([4]byte(b[2:6]))}
	case teredo.Contains(addr):
		server := netip.AddrFrom4([4]byte(b[4:8]))
		client := netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]})
		return []netip.Addr{server, client}
	}
	return nil
}

func mustPrefixes(s ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(s))
	for i, v := range s {
		out[i] = netip.MustParsePrefix(v)
	}
	return out
}

// forbiddenV4 lists IPv4 ranges that are never valid callback destinations.
var forbiddenV4 = mustPrefixes(
	"0.0.0.0/8",       // "this network", includes 0.0.0.0 (unspecified)
	"10.0.0.0/8",      // RFC 1918 private
	"100.64.0.0/10",   // carrier-grade NAT shared address space
	"127.0.0.0/8",     // loopback
	"169.254.0.0/16",  // link-local, includes 169.254.169.254 cloud metadata
	"172.16.0.0/12",   // RFC 1918 private
	"192.0.0.0/24",    // IETF protocol assignments (e.g. 192.0.0.192 Oracle metadata)
	"192.0.2.0/24",    // TEST-NET-1 documentation
	"192.88.99.0/24",  // deprecated 6to4 relay anycast
	"192.168.0.0/16",  // RFC 1918 private
	"198.18.0.0/15",   // benchmarking
	"198.51.100.0/24", // TEST-NET-2 documentation
	"203.0.113.0/24",  // TEST-NET-3 documentation
	"224.0.0.0/4",     // multicast
	"240.0.0.0/4",     // reserved, includes 255.255.255.255 broadcast
)

// forbiddenV6 lists IPv6 ranges that are never valid callback destinations.
// IPv4-mapped addresses are unmapped before this list is consulted.
var forbiddenV6 = mustPrefixes(
	"::/8",           // unspecified, loopback, deprecated IPv4-compatible and other reserved forms
	"64:ff9b:1::/48", // local-use NAT64: translation target is site-specific
	"100::/64",       // discard-only
	"2001:db8::/32",  // documentation
	"fc00::/7",       // unique local (private)
	"fe80::/10",      // link-local
	"fec0::/10",      // deprecated site-local
	"ff00::/8",       // multicast
)
