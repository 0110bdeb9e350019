// Package apikey resolves API keys to tenants and the services their keys
// are enabled for.
//
// Keys are Kubernetes Secrets in the operator's namespace, marked with the
// label emaildata.io/api-key=true:
//
//	stringData:
//	  key: <the API key>
//	  services: email_validation,email_append   # services the key may run
//	  tenant: acme                              # optional; the Secret's name when omitted
//	  rateLimit: "20"                           # optional requests/second for this key
//
// Keys are read through an informer, never with an API call per request,
// and held only as SHA-256 digests. A key is never logged. The package sees
// a Secret only as its name and data (Source and a map): the REST API turns
// the informer's Secrets into those, so this package needs no Kubernetes types.
package apikey

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/emaildata/emaildata/internal/services"
)

// Label marks Secrets that hold API keys.
const Label = "emaildata.io/api-key"

// Key is what a valid API key resolves to.
type Key struct {
	// Tenant owns the lists this key submits.
	Tenant string
	// Services the key is enabled for.
	Services map[string]bool
	// RateLimit in requests per second; 0 means the server default.
	RateLimit float64
	// Secret names the Secret, for operators (never the key itself).
	Secret string

	secretID string
}

// Enabled reports whether the key may run service.
func (k *Key) Enabled(service string) bool { return k.Services[service] }

// EnabledListServices returns the list services the key may run, sorted.
func (k *Key) EnabledListServices() []string {
	var out []string
	for _, s := range services.List {
		if k.Services[s] {
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

type digest [sha256.Size]byte

// Store maps key digests to keys. It is fed by Secret informer events.
type Store struct {
	mu       sync.RWMutex
	byDigest map[digest]*Key
	bySecret map[string]digest
}

// NewStore returns an empty store.
func NewStore() *Store {
	return &Store{byDigest: map[digest]*Key{}, bySecret: map[string]digest{}}
}

// Lookup resolves a presented key. Keys are never compared directly: the
// presented key is hashed first and looked up by its SHA-256 digest, so the
// time a lookup takes depends on digests an attacker cannot steer toward a
// stored key, not on how many leading bytes of a real key were guessed. The
// final equality check is constant-time as well.
func (s *Store) Lookup(presented string) (*Key, bool) {
	if presented == "" {
		return nil, false
	}
	d := digest(sha256.Sum256([]byte(presented)))
	s.mu.RLock()
	k, ok := s.byDigest[d]
	s.mu.RUnlock()
	if !ok {
		return nil, false
	}
	stored := s.digestOf(k)
	if subtle.ConstantTimeCompare(stored[:], d[:]) != 1 {
		return nil, false
	}
	return k, true
}

func (s *Store) digestOf(k *Key) digest {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.bySecret[k.secretID]
}

// Len returns the number of keys.
func (s *Store) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.byDigest)
}

// Source names the Secret that holds a key.
type Source struct {
	Namespace, Name string
}

// Upsert adds or replaces the key held by the Secret src, whose data (the
// Secret's Data, with StringData already folded in) is data. A Secret that is
// not a valid key Secret removes any key it held and returns why.
func (s *Store) Upsert(src Source, data map[string][]byte) error {
	name := src.Namespace + "/" + src.Name
	k, raw, err := parse(src.Name, data)
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.bySecret[name]; ok {
		delete(s.byDigest, old)
		delete(s.bySecret, name)
	}
	if err != nil {
		return fmt.Errorf("secret %s: %w", name, err)
	}
	d := digest(sha256.Sum256([]byte(raw)))
	// A key belongs to one Secret. Taking it over would switch its tenant
	// silently, and removing either Secret later would drop the entry the
	// other still holds; the duplicate is refused instead.
	if other, ok := s.byDigest[d]; ok {
		return fmt.Errorf("secret %s: the key is already held by secret %s; ignoring the duplicate", name, other.secretID)
	}
	k.secretID = name
	s.byDigest[d] = k
	s.bySecret[name] = d
	return nil
}

// Delete forgets the key held by a Secret.
func (s *Store) Delete(namespace, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	full := namespace + "/" + name
	if d, ok := s.bySecret[full]; ok {
		delete(s.byDigest, d)
		delete(s.bySecret, full)
	}
}

func parse(secretName string, data map[string][]byte) (*Key, string, error) {
	raw := strings.TrimSpace(string(data["key"]))
	if raw == "" {
		return nil, "", fmt.Errorf("no data key %q", "key")
	}
	if len(raw) < 16 {
		return nil, "", fmt.Errorf("the key is shorter than 16 characters")
	}
	k := &Key{Tenant: secretName, Services: map[string]bool{}, Secret: secretName}
	if t := strings.TrimSpace(string(data["tenant"])); t != "" {
		k.Tenant = t
	}
	for _, svc := range strings.Split(string(data["services"]), ",") {
		svc = strings.TrimSpace(svc)
		if svc == "" {
			continue
		}
		if !known(svc) {
			return nil, "", fmt.Errorf("unknown service %q (known: %s)", svc, strings.Join(services.Known, ", "))
		}
		k.Services[svc] = true
	}
	if len(k.Services) == 0 {
		return nil, "", fmt.Errorf("no services enabled (data key %q)", "services")
	}
	if v := strings.TrimSpace(string(data["rateLimit"])); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 {
			return nil, "", fmt.Errorf("rateLimit %q is not a positive number", v)
		}
		k.RateLimit = f
	}
	return k, raw, nil
}

func known(svc string) bool {
	for _, s := range services.Known {
		if s == svc {
			return true
		}
	}
	return false
}
