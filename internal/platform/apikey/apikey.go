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
// and held only as SHA-256 digests. A key is never logged. A key string
// held by several Secrets is used only while they agree on its tenant,
// services and rate limit (see Store). The package sees
// a Secret only as its name and data (Source and a map): the REST API turns
// the informer's Secrets into those, so this package needs no Kubernetes types.
package apikey

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/emaildata/emaildata/internal/platform/services"
)

// Label marks Secrets that hold API keys.
const Label = "emaildata.io/api-key"

// MinKeyLength is the shortest key a Secret may hold, in bytes (after
// trimming spaces): shorter keys are refused, never used.
const MinKeyLength = 16

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
//
// A key string belongs to one tenant. When several Secrets hold the same
// key, it is used only if they agree on everything the key means (tenant,
// services, rate limit: a copy of a Secret, or a Secret renamed by applying
// the new name before deleting the old one); if they disagree in anything,
// the key is refused for all of them until they agree again, since picking
// one would hand the key's lists to whichever Secret the informer delivered
// first, and that order changes between restarts. Clashes lists them (by
// Secret name, never the key).
type Store struct {
	mu sync.RWMutex
	// byDigest holds the usable keys.
	byDigest map[digest]*Key
	// secrets holds every valid key Secret by namespace/name, usable or not.
	secrets map[string]held
	// holders lists the Secrets holding each key, sorted.
	holders map[digest][]string
}

type held struct {
	digest digest
	key    *Key
}

// NewStore returns an empty store.
func NewStore() *Store {
	return &Store{byDigest: map[digest]*Key{}, secrets: map[string]held{}, holders: map[digest][]string{}}
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
	defer s.mu.RUnlock()
	k, ok := s.byDigest[d]
	if !ok {
		return nil, false
	}
	stored := s.secrets[k.secretID].digest
	if subtle.ConstantTimeCompare(stored[:], d[:]) != 1 {
		return nil, false
	}
	return k, true
}

// Len returns the number of usable keys.
func (s *Store) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.byDigest)
}

// Source names the Secret that holds a key.
type Source struct {
	Namespace, Name string
}

// ClashError reports Secrets that hold the same key but disagree on what it
// means; the key is refused for all of them. It names the Secrets, never
// the key.
type ClashError struct {
	// Secrets are the Secrets holding the key, as namespace/name, sorted.
	Secrets []string
	// Differ names what they disagree on: tenant, services or rateLimit.
	Differ []string
}

func (e *ClashError) Error() string {
	return fmt.Sprintf("secrets %s hold the same API key with different %s; the key is refused until they agree (or all but one are deleted)",
		strings.Join(e.Secrets, ", "), strings.Join(e.Differ, ", "))
}

// Upsert adds or replaces the key held by the Secret src, whose data (the
// Secret's Data, with StringData already folded in) is data. A Secret that is
// not a valid key Secret removes any key it held and returns why; a key that
// other Secrets hold with another meaning is refused with a *ClashError.
func (s *Store) Upsert(src Source, data map[string][]byte) error {
	name := src.Namespace + "/" + src.Name
	k, raw, err := parse(src.Name, data)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forget(name)
	if err != nil {
		return fmt.Errorf("secret %s: %w", name, err)
	}
	d := digest(sha256.Sum256([]byte(raw)))
	k.secretID = name
	s.secrets[name] = held{digest: d, key: k}
	hs := append(s.holders[d], name)
	sort.Strings(hs)
	s.holders[d] = hs
	return s.settle(d)
}

// Delete forgets the key held by a Secret.
func (s *Store) Delete(namespace, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forget(namespace + "/" + name)
}

// Clashes lists the keys refused because their Secrets disagree.
func (s *Store) Clashes() []ClashError {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []ClashError
	for d, hs := range s.holders {
		if _, usable := s.byDigest[d]; !usable && len(hs) > 1 {
			out = append(out, ClashError{Secrets: slices.Clone(hs), Differ: s.disagreement(hs)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Secrets[0] < out[j].Secrets[0] })
	return out
}

// forget drops the key Secret name held, if any. Callers hold mu.
func (s *Store) forget(name string) {
	h, ok := s.secrets[name]
	if !ok {
		return
	}
	delete(s.secrets, name)
	s.holders[h.digest] = slices.DeleteFunc(s.holders[h.digest], func(n string) bool { return n == name })
	_ = s.settle(h.digest) // fewer holders never make a clash
}

// settle decides whether key d is usable from the Secrets holding it.
// Callers hold mu.
func (s *Store) settle(d digest) error {
	hs := s.holders[d]
	if len(hs) == 0 {
		delete(s.holders, d)
		delete(s.byDigest, d)
		return nil
	}
	if differ := s.disagreement(hs); len(differ) > 0 {
		delete(s.byDigest, d)
		return &ClashError{Secrets: slices.Clone(hs), Differ: differ}
	}
	// Agreeing holders: the first by name speaks for the key, so its rate
	// limiter (kept by Secret name) stays the same whatever order they come in.
	s.byDigest[d] = s.secrets[hs[0]].key
	return nil
}

// disagreement names what the keys of Secrets hs differ in.
func (s *Store) disagreement(hs []string) []string {
	first := s.secrets[hs[0]].key
	var tenant, svcs, rate bool
	for _, h := range hs[1:] {
		k := s.secrets[h].key
		tenant = tenant || k.Tenant != first.Tenant
		svcs = svcs || !maps.Equal(k.Services, first.Services)
		rate = rate || k.RateLimit != first.RateLimit
	}
	var out []string
	for _, d := range []struct {
		differs bool
		name    string
	}{{tenant, "tenant"}, {svcs, "services"}, {rate, "rateLimit"}} {
		if d.differs {
			out = append(out, d.name)
		}
	}
	return out
}

func parse(secretName string, data map[string][]byte) (*Key, string, error) {
	raw := strings.TrimSpace(string(data["key"]))
	if raw == "" {
		return nil, "", fmt.Errorf("no data key %q", "key")
	}
	if len(raw) < MinKeyLength {
		return nil, "", fmt.Errorf("the key is shorter than %d characters", MinKeyLength)
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
