package callback

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/emaildata/emaildata/internal/platform/installsecret"
)

// Callbacks are signed as the Standard Webhooks specification says
// (standardwebhooks.com), so that receivers can use its libraries:
//
//	webhook-id:        the message's id, the same on every attempt
//	webhook-timestamp: the attempt's time, in Unix seconds
//	webhook-signature: v1,<base64 of HMAC-SHA256(key, id + "." + timestamp + "." + body)>
//
// A receiver recomputes the HMAC over the raw body with its key, compares
// in constant time, refuses a timestamp more than a few minutes from its
// clock (replays of an old message) and may remember ids it has seen
// (replays within that window). docs/callbacks.md shows it in Go, Python
// and shell.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
	// SignatureVersion prefixes each signature: v1 is HMAC-SHA256.
	SignatureVersion = "v1"
	// SecretPrefix prefixes a signing key's text form: whsec_<base64>.
	SecretPrefix = "whsec_"
)

// Bounds of a signing key's length in bytes (Standard Webhooks: 24 to 64).
const (
	MinKeyBytes = 24
	MaxKeyBytes = 64
)

// Where the keys come from. A list the REST API created is signed with its
// tenant's key, derived from the installation's signing key (the
// installation secret installsecret.CallbackSigning, in the operator's
// namespace, which the manager and the API read by name) and the tenant's
// label (TenantKey); the tenant reads its key from GET /v5/callback/secret.
// A list applied with kubectl names a Secret of its own namespace
// (spec.callbackSecretRef) whose SecretKeyField holds the key's text form.
const (
	// SecretKeyField is the key of a spec.callbackSecretRef Secret holding
	// a list's signing key in its text form (whsec_...).
	SecretKeyField = "secret"
)

// Signing says how one callback is signed.
type Signing struct {
	// Key is the signing key; nil sends the callback unsigned.
	Key []byte
	// ID is the webhook-id: the same on every attempt of one callback, so
	// a receiver can drop a delivery it already processed.
	ID string
	// Time is the attempt's time (webhook-timestamp).
	Time time.Time
}

// TenantKey derives a tenant's signing key from the installation's key and
// the tenant's label (the digest the REST API puts on its lists): HMAC-
// SHA256 with a context string, so the keys of two tenants are unrelated
// to anyone without the installation key.
func TenantKey(installation []byte, tenantLabel string) []byte {
	m := hmac.New(sha256.New, installation)
	m.Write([]byte("emaildata callback signing key v1\x00"))
	m.Write([]byte(tenantLabel))
	return m.Sum(nil)
}

// InstallationKey returns the installation's signing key from its
// Secret's data, refusing one that is too short (installsecret's rule).
func InstallationKey(data map[string][]byte) ([]byte, error) {
	spec, _ := installsecret.Lookup(installsecret.CallbackSigning)
	return spec.Key(data)
}

// FormatSecret is a key's text form, as receivers configure it: whsec_
// followed by the key in standard base64.
func FormatSecret(key []byte) string {
	return SecretPrefix + base64.StdEncoding.EncodeToString(key)
}

// ParseSecret reads a key's text form (FormatSecret). The message never
// repeats the text.
func ParseSecret(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, SecretPrefix) {
		return nil, fmt.Errorf("a callback signing secret starts with %q", SecretPrefix)
	}
	key, err := base64.StdEncoding.DecodeString(s[len(SecretPrefix):])
	if err != nil {
		return nil, fmt.Errorf("a callback signing secret is %q followed by standard base64", SecretPrefix)
	}
	if len(key) < MinKeyBytes || len(key) > MaxKeyBytes {
		return nil, fmt.Errorf("a callback signing secret holds %d to %d bytes, not %d", MinKeyBytes, MaxKeyBytes, len(key))
	}
	return key, nil
}

// Sign computes the webhook-signature value of body: "v1," then the
// base64 HMAC-SHA256 of id.timestamp.body under key.
func Sign(key []byte, id string, t time.Time, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(strconv.FormatInt(t.Unix(), 10)))
	m.Write([]byte{'.'})
	m.Write(body)
	return SignatureVersion + "," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// setHeaders adds s's headers for body to h; nothing when s has no key.
func (s Signing) setHeaders(h http.Header, body []byte) {
	if s.Key == nil {
		return
	}
	h.Set(HeaderID, s.ID)
	h.Set(HeaderTimestamp, strconv.FormatInt(s.Time.Unix(), 10))
	h.Set(HeaderSignature, Sign(s.Key, s.ID, s.Time, body))
}
