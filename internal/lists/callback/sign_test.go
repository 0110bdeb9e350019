package callback

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// The Standard Webhooks specification's published example: our signature
// is the one its libraries compute and check.
func TestSignKnownAnswer(t *testing.T) {
	key, err := ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	got := Sign(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`))
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Errorf("Sign = %q, want %q", got, want)
	}
}

func TestParseSecret(t *testing.T) {
	key24 := bytes.Repeat([]byte{7}, 24)
	for _, tc := range []struct {
		in   string
		want []byte
		err  string
	}{
		{FormatSecret(key24), key24, ""},
		{" " + FormatSecret(key24) + "\n", key24, ""}, // a Secret written with a newline
		{FormatSecret(bytes.Repeat([]byte{1}, 64)), bytes.Repeat([]byte{1}, 64), ""},
		{FormatSecret(bytes.Repeat([]byte{1}, 23)), nil, "24 to 64 bytes, not 23"},
		{FormatSecret(bytes.Repeat([]byte{1}, 65)), nil, "not 65"},
		{"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", nil, `starts with "whsec_"`},
		{"whsec_not base64!", nil, "standard base64"},
		{"", nil, `starts with "whsec_"`},
	} {
		got, err := ParseSecret(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseSecret(%q) error %v, want %q", tc.in, err, tc.err)
			}
			if err != nil && len(tc.in) > 10 && strings.Contains(err.Error(), tc.in[6:]) {
				t.Errorf("ParseSecret's error repeats the secret: %v", err)
			}
			continue
		}
		if err != nil || !bytes.Equal(got, tc.want) {
			t.Errorf("ParseSecret(%q) = %x, %v", tc.in, got, err)
		}
	}
}

// Tenant keys are stable, differ between tenants and between installation
// keys, and are valid Standard Webhooks secrets.
func TestTenantKey(t *testing.T) {
	inst := bytes.Repeat([]byte("k"), 32)
	a, b := TenantKey(inst, "tenant-a"), TenantKey(inst, "tenant-b")
	if bytes.Equal(a, b) || !bytes.Equal(a, TenantKey(inst, "tenant-a")) {
		t.Fatal("tenant keys must be stable and differ between tenants")
	}
	if bytes.Equal(a, TenantKey(bytes.Repeat([]byte("j"), 32), "tenant-a")) {
		t.Fatal("tenant keys must depend on the installation key")
	}
	if k, err := ParseSecret(FormatSecret(a)); err != nil || !bytes.Equal(k, a) {
		t.Fatalf("a tenant key's text form does not parse back: %v", err)
	}
	if _, err := InstallationKey(map[string][]byte{"key": inst[:31]}); err == nil {
		t.Error("a 31-byte installation key was accepted")
	}
	if k, err := InstallationKey(map[string][]byte{"key": inst}); err != nil || !bytes.Equal(k, inst) {
		t.Errorf("a 32-byte installation key: %q %v", k, err)
	}
}

// DeliverSigned's request verifies with the reference Standard Webhooks
// library under the right key and fails under another; Deliver sends no
// signature headers.
func TestDeliverSigned(t *testing.T) {
	type got struct {
		h    http.Header
		body []byte
	}
	recv := make(chan got, 2)
	r := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		recv <- got{req.Header.Clone(), b}
	}))
	defer r.Close()
	c := loopbackPolicy(t).Client(5 * time.Second)
	key := TenantKey(bytes.Repeat([]byte("i"), 32), "acme")
	now := time.Now()
	if err := DeliverSigned(context.Background(), c, r.URL, testPayload, Signing{Key: key, ID: "el_uid_Results", Time: now}); err != nil {
		t.Fatal(err)
	}
	g := <-recv
	if g.h.Get(HeaderID) != "el_uid_Results" || g.h.Get(HeaderTimestamp) == "" || !strings.HasPrefix(g.h.Get(HeaderSignature), "v1,") {
		t.Fatalf("headers %v", g.h)
	}
	wh, err := standardwebhooks.NewWebhook(FormatSecret(key))
	if err != nil {
		t.Fatal(err)
	}
	if err := wh.Verify(g.body, g.h); err != nil {
		t.Errorf("the reference library refuses our signature: %v", err)
	}
	other, _ := standardwebhooks.NewWebhook(FormatSecret(TenantKey(bytes.Repeat([]byte("i"), 32), "other")))
	if err := other.Verify(g.body, g.h); err == nil {
		t.Error("another tenant's key verifies the signature")
	}
	if err := wh.Verify(append(g.body, ' '), g.h); err == nil {
		t.Error("a changed body verifies")
	}

	if err := Deliver(context.Background(), c, r.URL, testPayload); err != nil {
		t.Fatal(err)
	}
	g = <-recv
	for _, h := range []string{HeaderID, HeaderTimestamp, HeaderSignature} {
		if g.h.Get(h) != "" {
			t.Errorf("an unsigned delivery carries %s", h)
		}
	}
}
