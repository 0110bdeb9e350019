package fraud

import (
	"errors"
	"net/netip"
	"slices"
	"strings"

	"github.com/oschwald/maxminddb-golang/v2"
)

// IP routing types reported in risk.ip.routing_type.
const (
	RoutingInvalid    = "invalid"    // not an IP address
	RoutingPrivate    = "private"    // private, reserved or otherwise not routable
	RoutingAnonymizer = "anonymizer" // Tor, VPN or proxy
	RoutingHosting    = "hosting"    // hosting provider or data centre
	RoutingUnknown    = "unknown"    // public, nothing known
)

// Proxy types reported in risk.ip.proxy_type.
const (
	ProxyTor   = "tor"
	ProxyVPN   = "vpn"
	ProxyProxy = "proxy"
)

// GeoRecord is what a GeoIP database knows of one address.
type GeoRecord struct {
	Country      string // ISO 3166 alpha-2, upper case; "" when unknown
	HasLocation  bool
	Latitude     float64
	Longitude    float64
	Organization string // AS organisation or ISP, when the database has it
}

// GeoIP looks addresses up in a location database.
type GeoIP interface {
	LookupIP(ip netip.Addr) (GeoRecord, bool)
}

// MaxMindDB is a GeoIP backed by one or more MaxMind-format (.mmdb)
// databases, for example a City and an ASN database: fields are taken from
// the first database that has them.
type MaxMindDB struct {
	readers []*maxminddb.Reader
}

// OpenMaxMind opens the .mmdb files at paths.
func OpenMaxMind(paths ...string) (*MaxMindDB, error) {
	if len(paths) == 0 {
		return nil, errors.New("fraud: no GeoIP database given")
	}
	db := &MaxMindDB{}
	for _, p := range paths {
		r, err := maxminddb.Open(p)
		if err != nil {
			db.Close()
			return nil, err
		}
		db.readers = append(db.readers, r)
	}
	return db, nil
}

// Close releases the databases.
func (db *MaxMindDB) Close() error {
	var errs []error
	for _, r := range db.readers {
		errs = append(errs, r.Close())
	}
	db.readers = nil
	return errors.Join(errs...)
}

// mmdbRecord holds the fields read from City/Country/ASN/ISP databases.
type mmdbRecord struct {
	Country struct {
		ISOCode string `maxminddb:"iso_code"`
	} `maxminddb:"country"`
	RegisteredCountry struct {
		ISOCode string `maxminddb:"iso_code"`
	} `maxminddb:"registered_country"`
	Location struct {
		Latitude  *float64 `maxminddb:"latitude"`
		Longitude *float64 `maxminddb:"longitude"`
	} `maxminddb:"location"`
	ASOrganization string `maxminddb:"autonomous_system_organization"`
	Organization   string `maxminddb:"organization"`
	ISP            string `maxminddb:"isp"`
}

// LookupIP implements GeoIP.
func (db *MaxMindDB) LookupIP(ip netip.Addr) (GeoRecord, bool) {
	var out GeoRecord
	found := false
	for _, r := range db.readers {
		res := r.Lookup(ip)
		if !res.Found() {
			continue
		}
		var rec mmdbRecord
		if err := res.Decode(&rec); err != nil {
			continue
		}
		found = true
		if out.Country == "" {
			out.Country = strings.ToUpper(rec.Country.ISOCode)
			if out.Country == "" {
				out.Country = strings.ToUpper(rec.RegisteredCountry.ISOCode)
			}
		}
		if !out.HasLocation && rec.Location.Latitude != nil && rec.Location.Longitude != nil {
			out.HasLocation = true
			out.Latitude, out.Longitude = *rec.Location.Latitude, *rec.Location.Longitude
		}
		if out.Organization == "" {
			for _, o := range []string{rec.ASOrganization, rec.Organization, rec.ISP} {
				if o != "" {
					out.Organization = o
					break
				}
			}
		}
	}
	return out, found
}

// prefixSet answers "is this address in any of these prefixes" by binary
// search over merged, sorted address ranges.
type prefixSet struct {
	v4, v6 []addrRange
}

type addrRange struct{ lo, hi netip.Addr }

func newPrefixSet(ps []netip.Prefix) prefixSet {
	var s prefixSet
	for _, p := range ps {
		p = p.Masked()
		r := addrRange{p.Addr(), lastAddr(p)}
		if r.lo.Is4() {
			s.v4 = append(s.v4, r)
		} else {
			s.v6 = append(s.v6, r)
		}
	}
	s.v4 = mergeRanges(s.v4)
	s.v6 = mergeRanges(s.v6)
	return s
}

func (s prefixSet) empty() bool { return len(s.v4) == 0 && len(s.v6) == 0 }

func (s prefixSet) contains(a netip.Addr) bool {
	rs := s.v6
	if a.Is4() {
		rs = s.v4
	}
	// First range whose hi >= a.
	i, _ := slices.BinarySearchFunc(rs, a, func(r addrRange, a netip.Addr) int { return r.hi.Compare(a) })
	return i < len(rs) && rs[i].lo.Compare(a) <= 0
}

func mergeRanges(rs []addrRange) []addrRange {
	if len(rs) == 0 {
		return nil
	}
	slices.SortFunc(rs, func(a, b addrRange) int { return a.lo.Compare(b.lo) })
	out := rs[:1]
	for _, r := range rs[1:] {
		last := &out[len(out)-1]
		next := last.hi.Next()
		if r.lo.Compare(last.hi) <= 0 || (next.IsValid() && r.lo == next) {
			if r.hi.Compare(last.hi) > 0 {
				last.hi = r.hi
			}
			continue
		}
		out = append(out, r)
	}
	return out
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	bits := p.Bits()
	for i := range b {
		for j := 0; j < 8; j++ {
			if i*8+j >= bits {
				b[i] |= 0x80 >> j
			}
		}
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// bogons are special-purpose ranges a real client address is never in (on
// top of what netip.Addr's predicates catch). IPv6 outside 2000::/3 is
// handled separately.
var bogons = newPrefixSet(mustPrefixes(
	"0.0.0.0/8", "100.64.0.0/10", "192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24",
	"198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", "240.0.0.0/4",
	"2001:db8::/32", "2001:10::/28", "2001:20::/28", "3fff::/20",
))

var globalUnicast6 = netip.MustParsePrefix("2000::/3")

func mustPrefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// parseIP parses an optional IP input. Surrounding spaces, an IPv4-mapped
// IPv6 form and a zone are tolerated.
func parseIP(s string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(strings.TrimSpace(s))
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// isBogon reports private, loopback, link-local, multicast, documentation
// and other reserved addresses.
func isBogon(a netip.Addr) bool {
	if a.IsPrivate() || a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsMulticast() ||
		a.IsUnspecified() || a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast() {
		return true
	}
	if a.Is6() && !globalUnicast6.Contains(a.WithZone("")) {
		return true
	}
	return bogons.contains(a.WithZone(""))
}

// ipSignals evaluates the optional IP input and fills risk.ip.
func (a *assessor) ipSignals(raw string) {
	if strings.TrimSpace(raw) == "" {
		return
	}
	info := &IPInfo{}
	a.out.Risk.IP = info
	addr, ok := parseIP(raw)
	if !ok {
		info.RoutingType = RoutingInvalid
		a.add(ReasonIPInvalid)
		return
	}
	addr = addr.WithZone("")
	a.ip = addr
	if isBogon(addr) {
		info.RoutingType = RoutingPrivate
		a.add(ReasonIPPrivate)
		return
	}
	info.RoutingType = RoutingUnknown
	sets := a.cfg.ip
	switch {
	case sets.tor.contains(addr):
		info.ProxyType, info.RoutingType = ProxyTor, RoutingAnonymizer
		a.add(ReasonIPTor)
	case sets.vpn.contains(addr):
		info.ProxyType, info.RoutingType = ProxyVPN, RoutingAnonymizer
		a.add(ReasonIPVPN)
	case sets.proxy.contains(addr):
		info.ProxyType, info.RoutingType = ProxyProxy, RoutingAnonymizer
		a.add(ReasonIPProxy)
	}
	if sets.hosting.contains(addr) {
		info.HostingFacility = true
		if info.RoutingType == RoutingUnknown {
			info.RoutingType = RoutingHosting
		}
		a.add(ReasonIPHosting)
	}
	if a.deps.GeoIP == nil {
		return
	}
	geo, ok := a.deps.GeoIP.LookupIP(addr)
	if !ok {
		return
	}
	info.Organization = geo.Organization
	info.Country = geo.Country
	if geo.HasLocation {
		lat, lon := geo.Latitude, geo.Longitude
		info.Latitude, info.Longitude = &lat, &lon
	}
	if info.RoutingType != RoutingUnknown {
		// The location of a Tor exit, VPN, proxy or data centre says
		// nothing about where the user is.
		return
	}
	a.ipCountry = geo.Country
	if a.country != "" && geo.Country != "" && geo.Country != a.country {
		a.add(ReasonIPCountryMismatch)
	}
}
