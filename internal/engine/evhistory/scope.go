package evhistory

import (
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"strings"
	"time"
)

// Scope says whose earlier checks may answer a call.
//
// ScopeTenant (the default): a tenant's answers come only from its own
// earlier checks. The tenant is part of the keyed hash, so one address
// checked by two tenants is two entries, and nothing one tenant does can
// be seen by another, not by its answers, not by max_age, not by timing.
// The cost: two tenants verifying the same addresses each probe them.
//
// ScopeShared (opt-in): every tenant's check answers every tenant. That
// discloses to a tenant that someone checked an address (a hit: no probe,
// an answer in a millisecond, ev_from_history true) and roughly when: a
// shared hit is dated to the hour (SharedDating), for the max_age it is
// compared with and for the TTL that ends it, so stepping max_age, or
// watching an entry expire, dates another tenant's check to the hour and
// no closer. It never says which tenant, nor what the tenant's list held
// beside that address.
type Scope string

// The scopes.
const (
	ScopeTenant Scope = "tenant"
	ScopeShared Scope = "shared"
)

// DefaultScope is the scope without configuration.
const DefaultScope = ScopeTenant

// SharedDating is how finely a verdict is dated in the shared scope: its
// check time is truncated to the hour before any comparison.
const SharedDating = time.Hour

// String implements flag.Value.
func (s *Scope) String() string { return string(*s) }

// Set implements flag.Value.
func (s *Scope) Set(v string) error {
	p, err := ParseScope(v)
	if err != nil {
		return err
	}
	*s = p
	return nil
}

// ParseScope reads a scope name; "" is DefaultScope.
func ParseScope(v string) (Scope, error) {
	switch Scope(strings.ToLower(strings.TrimSpace(v))) {
	case "":
		return DefaultScope, nil
	case ScopeTenant:
		return ScopeTenant, nil
	case ScopeShared:
		return ScopeShared, nil
	}
	return "", fmt.Errorf("history scope %q: want %q or %q", v, ScopeTenant, ScopeShared)
}

// Tenants of the history. A caller names itself with one of these, so
// that an API tenant and a namespace can never collide.

// APITenant is the history tenant of a REST API tenant, from the opaque
// digest the API labels its lists with (api/v1alpha1 LabelTenant): the
// same for its GET /v5/ev calls and its lists.
func APITenant(digest string) string { return "api/" + digest }

// NamespaceTenant is the history tenant of a list applied with kubectl (or
// any list the REST API did not create): its namespace.
func NamespaceTenant(namespace string) string { return "namespace/" + namespace }

// LocalTenant is `worker run`'s tenant by default: the operator's own
// runs on one machine.
const LocalTenant = "local"

// validTenant: a tenant is hashed before the mailbox with a NUL between
// them, so it must hold none.
func validTenant(t string) bool { return t != "" && !strings.ContainsRune(t, 0) }

// keyOf is the key of a mailbox (local@domain, the domain in ASCII): in
// the tenant scope HMAC(secret, "evt" 0 tenant 0 mailbox), in the shared
// scope HMAC(secret, "ev1" 0 mailbox), the key every verdict had before
// scopes (so a shared history keeps what it held).
func keyOf(secret []byte, scope Scope, tenant, mailbox string) Key {
	m := hmac.New(sha256.New, secret)
	if scope == ScopeShared {
		m.Write([]byte("ev1\x00"))
	} else {
		m.Write([]byte("evt\x00"))
		m.Write([]byte(tenant))
		m.Write([]byte{0})
	}
	m.Write([]byte(strings.ToLower(strings.TrimSpace(mailbox))))
	var k Key
	copy(k[:], m.Sum(nil))
	return k
}

// dated is when a verdict counts as checked for a caller of scope: the
// shared scope dates it to the hour, rounding down (older: never fresher
// than it is).
func dated(scope Scope, at time.Time) time.Time {
	if scope == ScopeShared {
		return at.Truncate(SharedDating)
	}
	return at
}
