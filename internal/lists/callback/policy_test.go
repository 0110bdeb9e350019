package callback

import (
	"net/netip"
	"strings"
	"testing"
)

func TestParsePolicy(t *testing.T) {
	tests := []struct {
		in      string
		want    string // Policy.String()
		wantErr string
	}{
		{in: "", want: ""},
		{in: " , ", want: ""},
		{in: "127.0.0.0/8", want: "127.0.0.0/8"},
		{in: "10.0.0.0/8, 192.168.1.0/24 ,fd00::/8", want: "10.0.0.0/8,192.168.1.0/24,fd00::/8"},
		{in: "10.1.2.3", want: "10.1.2.3/32"},
		{in: "::1", want: "::1/128"},
		{in: "::ffff:10.0.0.0/104", want: "10.0.0.0/8"},
		{in: "10.0.0.0/8,bogus", wantErr: `invalid allowed CIDR "bogus"`},
		{in: "10.0.0.0/33", wantErr: `invalid allowed CIDR "10.0.0.0/33"`},
		{in: "10.0.0.1/8", wantErr: `invalid allowed CIDR "10.0.0.1/8": host bits are set (did you mean 10.0.0.0/8?)`},
		{in: "fe80::1%eth0", wantErr: `invalid allowed CIDR "fe80::1%eth0"`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			p, err := ParsePolicy(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParsePolicy(%q) error = %v, want containing %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParsePolicy(%q) unexpected error: %v", tt.in, err)
			}
			if got := p.String(); got != tt.want {
				t.Errorf("ParsePolicy(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestAllowedDefaultPolicy(t *testing.T) {
	tests := []struct {
		addr string
		want bool
	}{
		// Public unicast.
		{"93.184.216.34", true},
		{"8.8.8.8", true},
		{"2606:2800:220:1:248:1893:25c8:1946", true},
		{"::ffff:93.184.216.34", true},
		{"64:ff9b::5db8:d822", true},          // NAT64 of 93.184.216.34
		{"2002:5db8:d822::1", true},           // 6to4 of 93.184.216.34
		{"2001:0:5db8:d822::a247:27dd", true}, // Teredo: server and client (^a247:27dd) both 93.184.216.34

		// IPv4 forbidden ranges.
		{"0.0.0.0", false},
		{"0.1.2.3", false},
		{"127.0.0.1", false},
		{"127.255.255.254", false},
		{"10.1.2.3", false},
		{"172.16.5.4", false},
		{"172.31.255.255", false},
		{"192.168.0.1", false},
		{"169.254.169.254", false},
		{"169.254.0.1", false},
		{"100.64.1.1", false},
		{"100.127.255.255", false},
		{"192.0.0.192", false},
		{"192.0.2.1", false},
		{"198.18.0.1", false},
		{"224.0.0.1", false},
		{"239.255.255.250", false},
		{"240.0.0.1", false},
		{"255.255.255.255", false},

		// Just outside forbidden ranges.
		{"172.32.0.1", true},
		{"100.128.0.1", true},
		{"11.0.0.1", true},

		// IPv6 forbidden ranges.
		{"::", false},
		{"::1", false},
		{"::127.0.0.1", false}, // deprecated IPv4-compatible
		{"fe80::1", false},
		{"fe80::1%eth0", false},
		{"fc00::1", false},
		{"fd12:3456::1", false},
		{"fec0::1", false},
		{"ff02::1", false},
		{"2001:db8::1", false},
		{"100::1", false},
		{"64:ff9b:1::1", false},

		// IPv4-mapped and embedding forms of forbidden addresses.
		{"::ffff:127.0.0.1", false},
		{"::ffff:10.0.0.1", false},
		{"::ffff:169.254.169.254", false},
		{"64:ff9b::7f00:1", false},             // NAT64 of 127.0.0.1
		{"64:ff9b::a9fe:a9fe", false},          // NAT64 of 169.254.169.254
		{"2002:7f00:1::1", false},              // 6to4 of 127.0.0.1
		{"2002:a00:1::1", false},               // 6to4 of 10.0.0.1
		{"2001:0:7f00:1::1", false},            // Teredo server 127.0.0.1
		{"2001:0:5db8:d822::80ff:fffe", false}, // Teredo client ^80ff:fffe = 127.0.0.1
	}
	var p Policy
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			addr := netip.MustParseAddr(tt.addr)
			if got := p.Allowed(addr); got != tt.want {
				t.Errorf("Allowed(%s) = %v, want %v", tt.addr, got, tt.want)
			}
		})
	}
	if p.Allowed(netip.Addr{}) {
		t.Error("Allowed(zero Addr) = true, want false")
	}
}

func TestAllowedWithAllowCIDRs(t *testing.T) {
	p, err := ParsePolicy("127.0.0.0/8,10.0.0.0/8,::1")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		addr string
		want bool
	}{
		{"127.0.0.1", true},
		{"127.1.2.3", true},
		{"::ffff:127.0.0.1", true},
		{"64:ff9b::7f00:1", true}, // NAT64 embedding an allowed address
		{"10.20.30.40", true},
		{"::1", true},
		{"192.168.0.1", false},
		{"169.254.169.254", false},
		{"fe80::1", false},
		{"93.184.216.34", true},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			if got := p.Allowed(netip.MustParseAddr(tt.addr)); got != tt.want {
				t.Errorf("Allowed(%s) = %v, want %v", tt.addr, got, tt.want)
			}
		})
	}

	// A policy built by hand with an IPv4-mapped prefix still matches.
	hand := Policy{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("::ffff:127.0.0.0/104")}}
	if !hand.Allowed(netip.MustParseAddr("127.0.0.1")) {
		t.Error("hand-built mapped prefix: Allowed(127.0.0.1) = false, want true")
	}
}
