package callback

import (
	"strings"
	"testing"
)

const blockedMsg = "callback_url must not point at a loopback, link-local or private address"

func TestValidateURL(t *testing.T) {
	// 512 characters exactly, and one more.
	prefix := "https://example.com/"
	url512 := prefix + strings.Repeat("a", 512-len(prefix))
	url513 := url512 + "a"
	// Length counts characters, not bytes.
	url512Unicode := prefix + strings.Repeat("é", 512-len(prefix))

	tests := []struct {
		name    string
		url     string
		wantErr string // "" means valid; otherwise the exact message
	}{
		{"https", "https://example.com/hooks/list?token=abc", ""},
		{"http with port", "http://receiver.example.com:8080/cb", ""},
		{"upper-case scheme", "HTTPS://Example.COM/cb", ""},
		{"trailing dot", "https://example.com./cb", ""},
		{"numeric labels not last", "https://1.2.3.example.com/cb", ""},
		{"localhost is a name, not resolved", "http://localhost:8080/cb", ""},
		{"in-cluster service name", "http://receiver.team-a.svc.cluster.local/cb", ""},
		{"public IPv4 literal", "http://93.184.216.34/cb", ""},
		{"public IPv6 literal", "http://[2606:2800:220:1:248:1893:25c8:1946]:8443/cb", ""},

		{"empty", "", "callback_url must not be empty"},
		{"blank", "   ", "callback_url must not be empty"},
		{"no scheme", "example.com/cb", "callback_url must use http or https"},
		{"scheme-relative", "//example.com/cb", "callback_url must use http or https"},
		{"ftp", "ftp://example.com/file", "callback_url must use http or https"},
		{"file", "file:///etc/passwd", "callback_url must use http or https"},
		{"javascript", "javascript:alert(1)", "callback_url must use http or https"},
		{"gopher", "gopher://127.0.0.1:6379/_FLUSHALL", "callback_url must use http or https"},

		{"512 characters", url512, ""},
		{"512 non-ASCII characters", url512Unicode, ""},
		{"513 characters", url513, "callback_url is longer than 512 characters"},

		{"userinfo", "https://user:pass@example.com/cb", "callback_url must not contain user info (credentials)"},
		{"username only", "https://user@example.com/cb", "callback_url must not contain user info (credentials)"},
		{"userinfo hiding host", "http://example.com@127.0.0.1/", "callback_url must not contain user info (credentials)"},

		{"missing host", "http:///cb", "callback_url must include a host"},
		{"opaque", "http:example.com", "callback_url must include a host"},
		{"port only", "http://:8080/cb", "callback_url must include a host"},

		{"port zero", "http://example.com:0/", "callback_url port must be between 1 and 65535"},
		{"port too large", "http://example.com:65536/", "callback_url port must be between 1 and 65535"},
		{"port max", "http://example.com:65535/", ""},
		{"port not numeric", "http://example.com:http/", `callback_url is not a valid URL: invalid port ":http" after host`},

		{"bad host chars", "http://exa mple.com/", `callback_url is not a valid URL: invalid character " " in host name`},
		{"empty label", "http://example..com/", `callback_url host "example..com" is not a valid DNS name`},
		{"sub-delims in host", "http://exa$mple.com/", `callback_url host "exa$mple.com" is not a valid DNS name`},
		{"escaped host", "http://exa%2Fmple.com/", `callback_url is not a valid URL: invalid URL escape "%2F"`},
		{"non-ASCII host", "http://exämple.com/", `callback_url host "exämple.com" is not a valid DNS name`},

		{"loopback", "http://127.0.0.1/", blockedMsg + " (127.0.0.1)"},
		{"loopback other", "http://127.0.1.1:8080/", blockedMsg + " (127.0.1.1)"},
		{"IPv6 loopback", "http://[::1]/", blockedMsg + " (::1)"},
		{"private 10/8", "http://10.1.2.3/", blockedMsg + " (10.1.2.3)"},
		{"private 192.168/16", "http://192.168.0.1/", blockedMsg + " (192.168.0.1)"},
		{"private 172.16/12", "http://172.16.5.4/", blockedMsg + " (172.16.5.4)"},
		{"metadata", "http://169.254.169.254/latest/meta-data/", blockedMsg + " (169.254.169.254)"},
		{"CGNAT", "http://100.64.1.1/", blockedMsg + " (100.64.1.1)"},
		{"unspecified", "http://0.0.0.0:8080/", blockedMsg + " (0.0.0.0)"},
		{"IPv6 unspecified", "http://[::]/", blockedMsg + " (::)"},
		{"IPv4-mapped loopback", "http://[::ffff:127.0.0.1]/", blockedMsg + " (::ffff:127.0.0.1)"},
		{"IPv4-mapped loopback hex", "http://[::ffff:7f00:1]/", blockedMsg + " (::ffff:127.0.0.1)"},
		{"link-local IPv6", "http://[fe80::1]/", blockedMsg + " (fe80::1)"},
		{"link-local IPv6 with zone", "http://[fe80::1%25eth0]/", blockedMsg + " (fe80::1)"},
		{"ULA", "http://[fd00::1]/", blockedMsg + " (fd00::1)"},
		{"NAT64 loopback", "http://[64:ff9b::7f00:1]/", blockedMsg + " (64:ff9b::7f00:1)"},
		{"broadcast", "http://255.255.255.255/", blockedMsg + " (255.255.255.255)"},

		// Numeric shorthands that inet_aton-style resolvers map to 127.0.0.1.
		{"decimal", "http://2130706433/", `callback_url host "2130706433" is not a valid host name or canonical IP address`},
		{"hex short", "http://0x7f.1/", `callback_url host "0x7f.1" is not a valid host name or canonical IP address`},
		{"hex whole", "http://0x7f000001/", `callback_url host "0x7f000001" is not a valid host name or canonical IP address`},
		{"octal", "http://0177.0.0.1/", `callback_url host "0177.0.0.1" is not a valid host name or canonical IP address`},
		{"short dotted", "http://127.1/", `callback_url host "127.1" is not a valid host name or canonical IP address`},
		{"dotted with trailing dot", "http://127.0.0.1./", `callback_url host "127.0.0.1." is not a valid host name or canonical IP address`},
		{"leading zeros", "http://127.000.000.001/", `callback_url host "127.000.000.001" is not a valid host name or canonical IP address`},
		{"public but non-canonical", "http://1572395042/", `callback_url host "1572395042" is not a valid host name or canonical IP address`},
	}
	var p Policy
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := p.ValidateURL(tt.url)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("ValidateURL(%q) = %v, want nil", tt.url, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("ValidateURL(%q) = nil, want %q", tt.url, tt.wantErr)
			}
			if err.Error() != tt.wantErr {
				t.Errorf("ValidateURL(%q) = %q, want %q", tt.url, err.Error(), tt.wantErr)
			}
			if !IsPermanent(err) {
				t.Errorf("IsPermanent(ValidateURL(%q)) = false, want true", tt.url)
			}
		})
	}
}

func TestValidateURLAllowList(t *testing.T) {
	p, err := ParsePolicy("127.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		url     string
		wantErr string
	}{
		{"http://127.0.0.1:8080/cb", ""},
		{"http://127.9.9.9/cb", ""},
		{"http://[::ffff:127.0.0.1]/cb", ""},
		{"http://[::1]/cb", blockedMsg + " (::1)"}, // only the IPv4 range was opened
		{"http://10.0.0.1/cb", blockedMsg + " (10.0.0.1)"},
		{"http://169.254.169.254/", blockedMsg + " (169.254.169.254)"},
		// Opening a range does not legitimise numeric shorthands.
		{"http://2130706433/", `callback_url host "2130706433" is not a valid host name or canonical IP address`},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			err := p.ValidateURL(tt.url)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.wantErr {
				t.Errorf("ValidateURL(%q) = %q, want %q", tt.url, got, tt.wantErr)
			}
		})
	}
}
