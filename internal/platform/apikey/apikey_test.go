package apikey_test

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/emaildata/emaildata/internal/platform/apikey"
)

const ns = "emaildata-system"

// secret builds a key Secret's name and data as the informer delivers them:
// with Data (the API server has already folded StringData into Data).
func secret(name string, data map[string]string) (apikey.Source, map[string][]byte) {
	d := map[string][]byte{}
	for k, v := range data {
		d[k] = []byte(v)
	}
	return apikey.Source{Namespace: ns, Name: name}, d
}

const (
	key1 = "0123456789abcdef-key-one"
	key2 = "0123456789abcdef-key-two"
)

func TestUpsertLookup(t *testing.T) {
	tests := []struct {
		name    string
		data    map[string]string
		wantErr string // substring of Upsert's error; "" for a valid Secret
		lookup  string // key presented to Lookup; defaults to data["key"]
		want    *apikey.Key
	}{
		{
			name: "valid",
			data: map[string]string{"key": key1, "services": "email_validation,email_append", "tenant": "acme", "rateLimit": "20"},
			want: &apikey.Key{Tenant: "acme", Services: map[string]bool{"email_validation": true, "email_append": true}, RateLimit: 20, Secret: "s"},
		},
		{
			name:   "spaces around values are trimmed",
			data:   map[string]string{"key": "  " + key1 + "\n", "services": " fraud , demographics ,", "tenant": " acme ", "rateLimit": " 2.5 "},
			lookup: key1,
			want:   &apikey.Key{Tenant: "acme", Services: map[string]bool{"fraud": true, "demographics": true}, RateLimit: 2.5, Secret: "s"},
		},
		{
			name: "tenant defaults to the Secret name",
			data: map[string]string{"key": key1, "services": "fraud"},
			want: &apikey.Key{Tenant: "s", Services: map[string]bool{"fraud": true}, Secret: "s"},
		},
		{
			name: "blank tenant defaults to the Secret name",
			data: map[string]string{"key": key1, "services": "fraud", "tenant": "   "},
			want: &apikey.Key{Tenant: "s", Services: map[string]bool{"fraud": true}, Secret: "s"},
		},
		{
			name: "exactly 16 characters",
			data: map[string]string{"key": "0123456789abcdef", "services": "fraud"},
			want: &apikey.Key{Tenant: "s", Services: map[string]bool{"fraud": true}, Secret: "s"},
		},
		{
			name:    "missing key data",
			data:    map[string]string{"services": "fraud"},
			wantErr: `no data key "key"`,
			lookup:  key1,
		},
		{
			name:    "blank key data",
			data:    map[string]string{"key": "   ", "services": "fraud"},
			wantErr: `no data key "key"`,
			lookup:  "   ",
		},
		{
			name:    "key shorter than 16",
			data:    map[string]string{"key": "0123456789abcde", "services": "fraud"},
			wantErr: "shorter than 16",
		},
		{
			name:    "unknown service",
			data:    map[string]string{"key": key1, "services": "email_validation,teleportation"},
			wantErr: `unknown service "teleportation"`,
		},
		{
			name:    "no services",
			data:    map[string]string{"key": key1},
			wantErr: "no services enabled",
		},
		{
			name:    "only separators as services",
			data:    map[string]string{"key": key1, "services": " , ,"},
			wantErr: "no services enabled",
		},
		{
			name:    "rateLimit not a number",
			data:    map[string]string{"key": key1, "services": "fraud", "rateLimit": "fast"},
			wantErr: `rateLimit "fast"`,
		},
		{
			name:    "rateLimit zero",
			data:    map[string]string{"key": key1, "services": "fraud", "rateLimit": "0"},
			wantErr: `rateLimit "0"`,
		},
		{
			name:    "rateLimit negative",
			data:    map[string]string{"key": key1, "services": "fraud", "rateLimit": "-5"},
			wantErr: `rateLimit "-5"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := apikey.NewStore()
			err := s.Upsert(secret("s", tt.data))
			if tt.wantErr == "" && err != nil {
				t.Fatalf("Upsert: %v", err)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Upsert error %v, want one containing %q", err, tt.wantErr)
				}
				if !strings.Contains(err.Error(), ns+"/s") {
					t.Errorf("error %q does not name the Secret", err)
				}
				if raw := strings.TrimSpace(tt.data["key"]); raw != "" && strings.Contains(err.Error(), raw) {
					t.Errorf("error %q reveals the key", err)
				}
			}
			lookup := tt.lookup
			if lookup == "" {
				lookup = tt.data["key"]
			}
			k, ok := s.Lookup(lookup)
			if tt.want == nil {
				if ok || k != nil || s.Len() != 0 {
					t.Fatalf("invalid Secret: Lookup = %+v, %v; Len %d", k, ok, s.Len())
				}
				return
			}
			if !ok {
				t.Fatalf("Lookup(%q) failed", lookup)
			}
			got := apikey.Key{Tenant: k.Tenant, Services: k.Services, RateLimit: k.RateLimit, Secret: k.Secret}
			if !reflect.DeepEqual(&got, tt.want) {
				t.Errorf("key %+v, want %+v", got, *tt.want)
			}
			if s.Len() != 1 {
				t.Errorf("Len %d, want 1", s.Len())
			}
		})
	}
}

func TestLookupEmptyAndUnknown(t *testing.T) {
	s := apikey.NewStore()
	if err := s.Upsert(secret("a", map[string]string{"key": key1, "services": "fraud"})); err != nil {
		t.Fatal(err)
	}
	for _, presented := range []string{"", key2, key1[:len(key1)-1], key1 + "x", strings.ToUpper(key1), " " + key1} {
		if k, ok := s.Lookup(presented); ok || k != nil {
			t.Errorf("Lookup(%q) = %+v, %v; want no key", presented, k, ok)
		}
	}
	if _, ok := apikey.NewStore().Lookup(""); ok {
		t.Error("empty store resolved the empty key")
	}
}

func TestUpdate(t *testing.T) {
	tests := []struct {
		name       string
		update     map[string]string
		wantErr    bool
		oldWorks   bool
		newWorks   bool
		wantTenant string
	}{
		{name: "key changes", update: map[string]string{"key": key2, "services": "fraud", "tenant": "acme"}, newWorks: true, wantTenant: "acme"},
		{name: "tenant changes, same key", update: map[string]string{"key": key1, "services": "fraud", "tenant": "globex"}, oldWorks: true, wantTenant: "globex"},
		{name: "turns invalid: key too short", update: map[string]string{"key": "short", "services": "fraud"}, wantErr: true},
		{name: "turns invalid: unknown service", update: map[string]string{"key": key1, "services": "nope"}, wantErr: true},
		{name: "turns invalid: key removed", update: map[string]string{"services": "fraud"}, wantErr: true},
		{name: "turns invalid: new key and bad rateLimit", update: map[string]string{"key": key2, "services": "fraud", "rateLimit": "x"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := apikey.NewStore()
			if err := s.Upsert(secret("a", map[string]string{"key": key1, "services": "fraud", "tenant": "acme"})); err != nil {
				t.Fatal(err)
			}
			err := s.Upsert(secret("a", tt.update))
			if (err != nil) != tt.wantErr {
				t.Fatalf("Upsert error %v, want error %v", err, tt.wantErr)
			}
			k1, ok1 := s.Lookup(key1)
			if ok1 != tt.oldWorks {
				t.Errorf("old key works: %v, want %v", ok1, tt.oldWorks)
			}
			k2, ok2 := s.Lookup(key2)
			if ok2 != tt.newWorks {
				t.Errorf("new key works: %v, want %v", ok2, tt.newWorks)
			}
			want := 0
			if tt.oldWorks || tt.newWorks {
				want = 1
			}
			if s.Len() != want {
				t.Errorf("Len %d, want %d", s.Len(), want)
			}
			for _, k := range []*apikey.Key{k1, k2} {
				if k != nil && k.Tenant != tt.wantTenant {
					t.Errorf("tenant %q, want %q", k.Tenant, tt.wantTenant)
				}
			}
			// The Secret turning valid again brings its key back.
			if tt.wantErr {
				if err := s.Upsert(secret("a", map[string]string{"key": key1, "services": "fraud"})); err != nil {
					t.Fatal(err)
				}
				if _, ok := s.Lookup(key1); !ok {
					t.Error("key not back after the Secret was fixed")
				}
			}
		})
	}
}

func TestDelete(t *testing.T) {
	s := apikey.NewStore()
	for name, key := range map[string]string{"a": key1, "b": key2} {
		if err := s.Upsert(secret(name, map[string]string{"key": key, "services": "fraud"})); err != nil {
			t.Fatal(err)
		}
	}
	s.Delete(ns, "a")
	if _, ok := s.Lookup(key1); ok {
		t.Error("deleted Secret's key still works")
	}
	if k, ok := s.Lookup(key2); !ok || k.Secret != "b" {
		t.Errorf("other key: %+v, %v", k, ok)
	}
	if s.Len() != 1 {
		t.Errorf("Len %d, want 1", s.Len())
	}
	// Unknown Secrets, another namespace and a second delete are no-ops.
	s.Delete(ns, "a")
	s.Delete(ns, "missing")
	s.Delete("other-namespace", "b")
	if _, ok := s.Lookup(key2); !ok || s.Len() != 1 {
		t.Errorf("no-op deletes removed a key (Len %d)", s.Len())
	}
	s.Delete(ns, "b")
	if _, ok := s.Lookup(key2); ok || s.Len() != 0 {
		t.Errorf("store not empty: Len %d", s.Len())
	}
}

// TestSameNameOtherNamespace: Secrets are identified by namespace/name.
func TestSameNameOtherNamespace(t *testing.T) {
	s := apikey.NewStore()
	a, aData := secret("k", map[string]string{"key": key1, "services": "fraud"})
	b, bData := secret("k", map[string]string{"key": key2, "services": "fraud"})
	b.Namespace = "elsewhere"
	if err := s.Upsert(a, aData); err != nil {
		t.Fatal(err)
	}
	if err := s.Upsert(b, bData); err != nil {
		t.Fatal(err)
	}
	s.Delete(ns, "k")
	if _, ok := s.Lookup(key1); ok {
		t.Error("deleted key works")
	}
	if _, ok := s.Lookup(key2); !ok {
		t.Error("the other namespace's key was removed")
	}
}

// TestDuplicateKey: two Secrets holding the same key string. If they
// disagree on what the key means (another tenant, other services, another
// rate limit), the key is refused for both, whichever came first, with an
// error naming both Secrets and never the key; it works again once they
// agree or one of them goes. If they agree, the key works, as one key.
func TestDuplicateKey(t *testing.T) {
	a := map[string]string{"key": key1, "services": "fraud", "tenant": "acme"}
	with := func(k, v string) map[string]string {
		m := maps.Clone(a)
		m[k] = v
		return m
	}
	tests := []struct {
		name   string
		b      map[string]string
		differ string // "" when the two agree
	}{
		{"another tenant", with("tenant", "globex"), "tenant"},
		{"another tenant by default (the Secret's name)", map[string]string{"key": key1, "services": "fraud"}, "tenant"},
		{"other services", with("services", "fraud,demographics"), "services"},
		{"another rate limit", with("rateLimit", "5"), "rateLimit"},
		{"a copy", maps.Clone(a), ""},
		{"a copy with services in another order", with("services", " fraud ,"), ""},
	}
	for _, tt := range tests {
		for _, order := range []string{"a first", "b first"} {
			t.Run(tt.name+"/"+order, func(t *testing.T) {
				s := apikey.NewStore()
				first, second := secretA(a), secretB(tt.b)
				if order == "b first" {
					first, second = second, first
				}
				if err := s.Upsert(first()); err != nil {
					t.Fatal(err)
				}
				err := s.Upsert(second())
				k, ok := s.Lookup(key1)
				if tt.differ == "" {
					if err != nil || !ok || k.Tenant != "acme" || k.Secret != "a" {
						t.Fatalf("agreeing copies: error %v, key %+v %v; want the key of acme, spoken for by a", err, k, ok)
					}
					if s.Len() != 1 || len(s.Clashes()) != 0 {
						t.Errorf("Len %d, clashes %v; want one key, no clash", s.Len(), s.Clashes())
					}
					s.Delete(ns, "a")
					if k, ok := s.Lookup(key1); !ok || k.Secret != "b" {
						t.Errorf("after deleting a: %+v %v; want b's key", k, ok)
					}
					return
				}
				var clash *apikey.ClashError
				if !errors.As(err, &clash) {
					t.Fatalf("Upsert of the second Secret: %v, want a *ClashError", err)
				}
				msg := err.Error()
				if !strings.Contains(msg, ns+"/a") || !strings.Contains(msg, ns+"/b") || !strings.Contains(msg, tt.differ) {
					t.Errorf("error %q should name both Secrets and what differs (%s)", msg, tt.differ)
				}
				if strings.Contains(msg, key1) {
					t.Errorf("error %q reveals the key", msg)
				}
				if ok || k != nil || s.Len() != 0 {
					t.Fatalf("clashing key resolves: %+v %v (Len %d); want it refused for both", k, ok, s.Len())
				}
				cl := s.Clashes()
				if len(cl) != 1 || !reflect.DeepEqual(cl[0].Secrets, []string{ns + "/a", ns + "/b"}) || !reflect.DeepEqual(cl[0].Differ, []string{tt.differ}) {
					t.Errorf("Clashes() = %+v", cl)
				}
				// Still refused after a resync of either Secret.
				if err := s.Upsert(first()); err == nil {
					t.Error("resync of a clashing Secret: no error")
				}
				if _, ok := s.Lookup(key1); ok {
					t.Error("a resync made the clashing key usable")
				}
				// The Secrets agree again: the key works.
				if err := s.Upsert(secretB(a)()); err != nil {
					t.Fatalf("b agrees again: %v", err)
				}
				if k, ok := s.Lookup(key1); !ok || k.Tenant != "acme" || len(s.Clashes()) != 0 {
					t.Errorf("after b agrees: %+v %v, clashes %v", k, ok, s.Clashes())
				}
			})
		}
	}
}

// TestDuplicateKeyResolved: a clash ends when all but one holder go,
// change their key or turn invalid; the remaining Secret's key works.
func TestDuplicateKeyResolved(t *testing.T) {
	a := map[string]string{"key": key1, "services": "fraud", "tenant": "acme"}
	b := map[string]string{"key": key1, "services": "fraud", "tenant": "globex"}
	for _, tt := range []struct {
		name string
		then func(s *apikey.Store)
		want string // tenant whose key key1 is afterwards
	}{
		{"b deleted", func(s *apikey.Store) { s.Delete(ns, "b") }, "acme"},
		{"a deleted", func(s *apikey.Store) { s.Delete(ns, "a") }, "globex"},
		{"b changes its key", func(s *apikey.Store) {
			_ = s.Upsert(secret("b", map[string]string{"key": key2, "services": "fraud", "tenant": "globex"}))
		}, "acme"},
		{"b turns invalid", func(s *apikey.Store) {
			_ = s.Upsert(secret("b", map[string]string{"key": key1, "services": "nope", "tenant": "globex"}))
		}, "acme"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := apikey.NewStore()
			_ = s.Upsert(secret("a", a))
			if err := s.Upsert(secret("b", b)); err == nil {
				t.Fatal("no clash")
			}
			tt.then(s)
			if k, ok := s.Lookup(key1); !ok || k.Tenant != tt.want {
				t.Errorf("after %s: %+v %v; want the key of %s", tt.name, k, ok, tt.want)
			}
			if len(s.Clashes()) != 0 {
				t.Errorf("clashes remain: %v", s.Clashes())
			}
		})
	}
	// Three holders, two agreeing: refused until the third goes.
	s := apikey.NewStore()
	_ = s.Upsert(secret("a", a))
	_ = s.Upsert(secret("a2", a))
	if err := s.Upsert(secret("b", b)); err == nil {
		t.Fatal("no clash with three holders")
	}
	if _, ok := s.Lookup(key1); ok {
		t.Fatal("clashing key resolves")
	}
	s.Delete(ns, "b")
	if k, ok := s.Lookup(key1); !ok || k.Tenant != "acme" || k.Secret != "a" {
		t.Errorf("after the third went: %+v %v", k, ok)
	}
}

func secretA(data map[string]string) func() (apikey.Source, map[string][]byte) {
	return func() (apikey.Source, map[string][]byte) { return secret("a", data) }
}

func secretB(data map[string]string) func() (apikey.Source, map[string][]byte) {
	return func() (apikey.Source, map[string][]byte) { return secret("b", data) }
}

func TestEnabledListServices(t *testing.T) {
	tests := []struct {
		services string
		want     []string
	}{
		{"fraud,demographics", nil},
		{"email_validation", []string{"email_validation"}},
		{"fraud,email_validation,demographics", []string{"email_validation"}},
		{"email_validation,email_intelligence,email_append,fraud", []string{"email_append", "email_intelligence", "email_validation"}},
		{"email_intelligence,email_append", []string{"email_append", "email_intelligence"}},
	}
	for _, tt := range tests {
		t.Run(tt.services, func(t *testing.T) {
			s := apikey.NewStore()
			if err := s.Upsert(secret("a", map[string]string{"key": key1, "services": tt.services})); err != nil {
				t.Fatal(err)
			}
			k, _ := s.Lookup(key1)
			got := k.EnabledListServices()
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("EnabledListServices() = %q, want %q", got, tt.want)
			}
			for _, svc := range strings.Split(tt.services, ",") {
				if !k.Enabled(svc) {
					t.Errorf("Enabled(%q) = false", svc)
				}
			}
			if k.Enabled("teleportation") {
				t.Error("Enabled(unknown) = true")
			}
		})
	}
}

// TestConcurrentLookup runs Lookups while Upserts, key rotations and
// Deletes go on; run it with -race. A stable key must always resolve.
func TestConcurrentLookup(t *testing.T) {
	s := apikey.NewStore()
	stable := "stable-key-0000000000000"
	if err := s.Upsert(secret("stable", map[string]string{"key": stable, "services": "fraud", "tenant": "acme"})); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				name := fmt.Sprintf("rot-%d-%d", w, i%8)
				_ = s.Upsert(secret(name, map[string]string{"key": fmt.Sprintf("rotating-key-%d-%08d", w, i), "services": "fraud"}))
				_ = s.Upsert(secret("stable", map[string]string{"key": stable, "services": "fraud", "tenant": "acme"}))
				if i%5 == 0 {
					s.Delete(ns, name)
				}
			}
		}()
	}
	var failures atomic.Int64
	var readers sync.WaitGroup
	for r := 0; r < 4; r++ {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for i := 0; i < 20000; i++ {
				if k, ok := s.Lookup(stable); !ok || k.Tenant != "acme" || !k.Enabled("fraud") {
					failures.Add(1)
				}
				_, _ = s.Lookup(fmt.Sprintf("rotating-key-%d-%08d", r%2, i))
				_ = s.Len()
			}
		}()
	}
	readers.Wait()
	stop.Store(true)
	wg.Wait()
	if n := failures.Load(); n > 0 {
		t.Errorf("the stable key failed to resolve %d times during concurrent updates", n)
	}
}

func BenchmarkLookup(b *testing.B) {
	s := apikey.NewStore()
	for i := 0; i < 1000; i++ {
		if err := s.Upsert(secret(fmt.Sprintf("k%d", i), map[string]string{"key": fmt.Sprintf("benchmark-key-%08d", i), "services": "email_validation"})); err != nil {
			b.Fatal(err)
		}
	}
	presented := "benchmark-key-00000500"
	b.Run("hit", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, ok := s.Lookup(presented); !ok {
					b.Fatal("miss")
				}
			}
		})
	})
	b.Run("miss", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, ok := s.Lookup("not-a-valid-key-at-all"); ok {
					b.Fatal("hit")
				}
			}
		})
	})
}
