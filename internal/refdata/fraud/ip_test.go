package fraud

import (
	"context"
	"net/netip"
	"testing"
)

func TestIPSignals(t *testing.T) {
	geo := buildMMDB(t, []geoNet{
		{CIDR: "73.0.0.0/8", Country: "US", Lat: 39.7, Lon: -104.9, Org: "Comcast Cable"},
		{CIDR: "81.2.69.0/24", Country: "GB", Lat: 51.5, Lon: -0.09},
		{CIDR: "104.131.0.0/16", Country: "US", Lat: 40.7, Lon: -74.0, Org: "DigitalOcean"},
		{CIDR: "2a02:8100::/27", Country: "DE", Lat: 52.5, Lon: 13.4},
	})
	s := New(testConfig(t, nil), Deps{GeoIP: geo})
	tests := []struct {
		name, ip, country string
		routing, proxy    string
		hosting           bool
		want, notWant     []string
		geoCountry        string
	}{
		{name: "not an ip", ip: "999.1.2.3", routing: RoutingInvalid, want: []string{ReasonIPInvalid}},
		{name: "garbage", ip: "hello", routing: RoutingInvalid, want: []string{ReasonIPInvalid}},
		{name: "private", ip: "192.168.1.20", routing: RoutingPrivate, want: []string{ReasonIPPrivate}},
		{name: "loopback v6", ip: "::1", routing: RoutingPrivate, want: []string{ReasonIPPrivate}},
		{name: "cgnat", ip: "100.64.3.4", routing: RoutingPrivate, want: []string{ReasonIPPrivate}},
		{name: "documentation", ip: "203.0.113.9", routing: RoutingPrivate, want: []string{ReasonIPPrivate}},
		{name: "reserved class E", ip: "250.1.1.1", routing: RoutingPrivate, want: []string{ReasonIPPrivate}},
		{name: "ula v6", ip: "fd00::1", routing: RoutingPrivate, want: []string{ReasonIPPrivate}},
		{name: "mapped private", ip: "::ffff:10.1.2.3", routing: RoutingPrivate, want: []string{ReasonIPPrivate}},
		{name: "tor", ip: "185.220.101.7", routing: RoutingAnonymizer, proxy: ProxyTor, want: []string{ReasonIPTor}},
		{name: "vpn", ip: "89.187.170.1", routing: RoutingAnonymizer, proxy: ProxyVPN, want: []string{ReasonIPVPN}},
		{name: "proxy on hosting", ip: "45.95.147.1", routing: RoutingAnonymizer, proxy: ProxyProxy, hosting: true,
			want: []string{ReasonIPProxy, ReasonIPHosting}},
		{name: "hosting", ip: "104.131.5.5", country: "US", routing: RoutingHosting, hosting: true,
			want: []string{ReasonIPHosting}, notWant: []string{ReasonIPCountryMismatch}, geoCountry: "US"},
		{name: "hosting v6", ip: "2604:a880::5", routing: RoutingHosting, hosting: true, want: []string{ReasonIPHosting}},
		{name: "residential match", ip: "73.12.1.1", country: "us", routing: RoutingUnknown, geoCountry: "US",
			notWant: []string{ReasonIPCountryMismatch, ReasonIPHosting, ReasonIPInvalid}},
		{name: "country mismatch", ip: "81.2.69.142", country: "US", routing: RoutingUnknown, geoCountry: "GB",
			want: []string{ReasonIPCountryMismatch}},
		{name: "uk alias", ip: "81.2.69.142", country: "UK", routing: RoutingUnknown, geoCountry: "GB",
			notWant: []string{ReasonIPCountryMismatch, ReasonCountryUnknown}},
		{name: "v6 geo", ip: "2a02:8100::1", country: "FR", routing: RoutingUnknown, geoCountry: "DE",
			want: []string{ReasonIPCountryMismatch}},
		{name: "unknown country no mismatch", ip: "81.2.69.142", country: "XX", routing: RoutingUnknown, geoCountry: "GB",
			want: []string{ReasonCountryUnknown}, notWant: []string{ReasonIPCountryMismatch}},
		{name: "not in db", ip: "8.8.8.8", country: "US", routing: RoutingUnknown,
			notWant: []string{ReasonIPCountryMismatch}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{Email: "ann@gmail.com", IP: tc.ip, Country: tc.country}
			a := s.Assess(context.Background(), testTenant, in, okResult(in.Email))
			ip := a.Risk.IP
			if ip == nil {
				t.Fatal("risk.ip missing")
			}
			if ip.RoutingType != tc.routing || ip.ProxyType != tc.proxy || ip.HostingFacility != tc.hosting {
				t.Errorf("ip = %+v, want routing %q proxy %q hosting %v", *ip, tc.routing, tc.proxy, tc.hosting)
			}
			if ip.Country != tc.geoCountry {
				t.Errorf("geo country %q, want %q", ip.Country, tc.geoCountry)
			}
			if tc.geoCountry != "" && (ip.Latitude == nil || ip.Longitude == nil) {
				t.Errorf("no location")
			}
			checkCodes(t, a, tc.want, tc.notWant)
		})
	}

	t.Run("organization and location", func(t *testing.T) {
		a := s.Assess(context.Background(), testTenant, Input{Email: "ann@gmail.com", IP: "73.1.2.3"}, okResult("ann@gmail.com"))
		ip := a.Risk.IP
		if ip.Organization != "Comcast Cable" || *ip.Latitude != 39.7 || *ip.Longitude != -104.9 {
			t.Errorf("ip = %+v", *ip)
		}
	})
	t.Run("no ip no object", func(t *testing.T) {
		a := s.Assess(context.Background(), testTenant, Input{Email: "ann@gmail.com"}, okResult("ann@gmail.com"))
		if a.Risk.IP != nil {
			t.Errorf("risk.ip = %+v without ip", a.Risk.IP)
		}
	})
}

func TestPrefixSet(t *testing.T) {
	s := newPrefixSet(mustPrefixes("10.0.0.0/24", "10.0.1.0/24", "10.0.0.128/25", "10.5.0.0/16", "2001:db8::/48", "1.2.3.4/32"))
	if len(s.v4) != 3 {
		t.Errorf("v4 ranges not merged: %v", s.v4)
	}
	tests := []struct {
		ip   string
		want bool
	}{
		{"10.0.0.0", true}, {"10.0.1.255", true}, {"10.0.2.0", false}, {"9.255.255.255", false},
		{"10.5.200.1", true}, {"10.6.0.0", false}, {"1.2.3.4", true}, {"1.2.3.5", false},
		{"2001:db8::1", true}, {"2001:db8:1::1", false}, {"255.255.255.255", false},
	}
	for _, tc := range tests {
		if got := s.contains(netip.MustParseAddr(tc.ip)); got != tc.want {
			t.Errorf("contains(%s) = %v, want %v", tc.ip, got, tc.want)
		}
	}
	if (prefixSet{}).contains(netip.MustParseAddr("1.1.1.1")) {
		t.Error("empty set contains an address")
	}
}

func TestIsBogon(t *testing.T) {
	for ip, want := range map[string]bool{
		"8.8.8.8": false, "1.1.1.1": false, "2606:4700::1111": false, "73.12.1.1": false,
		"10.0.0.1": true, "172.16.5.4": true, "127.0.0.1": true, "169.254.1.1": true, "0.1.2.3": true,
		"224.0.0.1": true, "255.255.255.255": true, "198.18.0.1": true, "192.0.2.1": true,
		"fe80::1": true, "::": true, "ff02::1": true, "2001:db8::1": true, "64:ff9b::1": true,
	} {
		a, _ := parseIP(ip)
		if got := isBogon(a); got != want {
			t.Errorf("isBogon(%s) = %v, want %v", ip, got, want)
		}
	}
}
