// Package installsecret names the installation's secrets: keys one
// installation of emaildata makes once and then keeps for its whole life,
// because what was made with them (public list IDs, the callback keys
// tenants configured) must stay valid. It says, for each kind, what the
// Secret holds and how it is made; it imports nothing of Kubernetes, so
// the domain packages that use a key (internal/lists/listid,
// internal/lists/callback) take its name and field from here too.
//
// Who does what with them (docs/install.md, "Installation secrets"):
//
//   - the elected manager creates each missing one in its own namespace
//     when it starts, and never overwrites one (internal/operator);
//   - an installer may bring its own instead (the chart's
//     installationSecrets.*.existingSecret, the manager's
//     --external-secrets): the manager then only waits for it;
//   - the manager and the API read them by name only (a get, never a
//     list or a watch), so their RBAC grants get on these names alone.
//
// A new kind is one more entry in Specs; the flags, the manager's
// creation, the chart's RBAC (its names are rendered from the same
// suffixes) and the tests follow from the table.
package installsecret

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
)

// Kind names a kind of installation secret. It is also the Secret's
// app.kubernetes.io/component label and the stem of its flag.
type Kind string

// The kinds.
const (
	// ListIDKey keys the permutation that turns the list counter's values
	// into public list IDs (internal/lists/listid), so that IDs do not
	// count other tenants' lists.
	ListIDKey Kind = "list-id-key"
	// CallbackSigning is the installation's callback signing key, from
	// which each REST tenant's key is derived (internal/lists/callback).
	CallbackSigning Kind = "callback-signing"
)

// DefaultPrefix prefixes the default names: config/default's namePrefix
// and the chart's fullname for the release "emaildata".
const DefaultPrefix = "emaildata"

// Field is the data key holding every installation secret's key, as bytes
// (not base64 text).
const Field = "key"

// Spec says what one kind of installation secret holds and how it is made.
type Spec struct {
	Kind Kind
	// Suffix names the Secret after the installation's prefix:
	// <prefix>-<suffix> (emaildata-list-ids-key).
	Suffix string
	// Bytes is how many random bytes a made key has; MinBytes the fewest a
	// Secret brought by the installer may hold.
	Bytes, MinBytes int
	// Usage says what the key is for, in flag help and errors.
	Usage string
}

// Specs lists the kinds of installation secrets, in creation order.
func Specs() []Spec {
	return []Spec{
		{Kind: ListIDKey, Suffix: "list-ids-key", Bytes: 32, MinBytes: 32,
			Usage: "the list ID key: public list IDs are a keyed permutation of the counter's values"},
		{Kind: CallbackSigning, Suffix: "callback-signing", Bytes: 32, MinBytes: 32,
			Usage: "the installation's callback signing key, from which each API tenant's key is derived"},
	}
}

// Lookup returns the Spec of kind k.
func Lookup(k Kind) (Spec, bool) {
	i := slices.IndexFunc(Specs(), func(s Spec) bool { return s.Kind == k })
	if i < 0 {
		return Spec{}, false
	}
	return Specs()[i], true
}

// Flag is the flag of the manager and the API naming the Secret of kind k.
func (k Kind) Flag() string { return string(k) + "-secret" }

// Flag is the flag of the manager and the API naming the Secret.
func (s Spec) Flag() string { return s.Kind.Flag() }

// Name is the Secret's name for an installation whose objects are
// prefixed with prefix.
func (s Spec) Name(prefix string) string { return prefix + "-" + s.Suffix }

// Labels are the labels of a Secret the manager makes.
func (s Spec) Labels() map[string]string {
	return map[string]string{"app.kubernetes.io/name": "emaildata", "app.kubernetes.io/component": string(s.Kind)}
}

// Make returns the data of a new Secret of this kind: Bytes bytes from
// random (crypto/rand.Reader in production) under Field.
func (s Spec) Make(random io.Reader) (map[string][]byte, error) {
	k := make([]byte, s.Bytes)
	if _, err := io.ReadFull(random, k); err != nil {
		return nil, fmt.Errorf("make %s: %w", s.Kind, err)
	}
	return map[string][]byte{Field: k}, nil
}

// ErrUnusable wraps why a Secret's data holds no usable key.
var ErrUnusable = errors.New("unusable installation secret")

// Key returns the key held in a Secret's data, or an error naming what is
// wrong (never the value) that wraps ErrUnusable.
func (s Spec) Key(data map[string][]byte) ([]byte, error) {
	k := data[Field]
	if len(k) < s.MinBytes {
		return nil, fmt.Errorf("%w: %s: field %q holds %d bytes, at least %d are needed", ErrUnusable, s.Kind, Field, len(k), s.MinBytes)
	}
	return k, nil
}

// Config names the installation's Secrets, all in the operator's
// namespace. The zero Config names the defaults.
type Config struct {
	// Names holds a Secret name by kind; a kind missing here is named
	// Spec.Name(DefaultPrefix).
	Names map[Kind]string
	// External lists the kinds the installer provides (the manager's
	// --external-secrets): the manager never creates them and waits for
	// them instead. Only the manager reads it.
	External []Kind
}

// Name is the Secret name of kind k.
func (c Config) Name(k Kind) string {
	if n := c.Names[k]; n != "" {
		return n
	}
	s, _ := Lookup(k)
	return s.Name(DefaultPrefix)
}

// Creates reports whether the manager makes kind k when it is missing.
func (c Config) Creates(k Kind) bool { return !slices.Contains(c.External, k) }

// BindFlags binds one flag per kind naming its Secret (--list-id-key-secret,
// --callback-signing-secret): the manager and the API take the same ones.
func (c *Config) BindFlags(fs *flag.FlagSet) {
	if c.Names == nil {
		c.Names = map[Kind]string{}
	}
	for _, s := range Specs() {
		fs.Func(s.Flag(), fmt.Sprintf("Secret in --namespace holding %s in its field %q (default %s)", s.Usage, Field, s.Name(DefaultPrefix)),
			func(v string) error {
				if v == "" {
					return errors.New("a Secret name is needed")
				}
				c.Names[s.Kind] = v
				return nil
			})
	}
}

// BindManagerFlags binds the flags only the manager takes: --external-secrets.
func (c *Config) BindManagerFlags(fs *flag.FlagSet) {
	fs.Func("external-secrets", "installation secrets the installer provides, comma separated ("+kindList()+
		"): the manager waits for them instead of creating them when missing", func(v string) error {
		ks, err := ParseKinds(v)
		c.External = ks
		return err
	})
}

// ParseKinds parses a comma separated list of kinds.
func ParseKinds(v string) ([]Kind, error) {
	var out []Kind
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if _, ok := Lookup(Kind(f)); !ok {
			return nil, fmt.Errorf("unknown installation secret %q (known: %s)", f, kindList())
		}
		out = append(out, Kind(f))
	}
	return out, nil
}

func kindList() string {
	var ks []string
	for _, s := range Specs() {
		ks = append(ks, string(s.Kind))
	}
	sort.Strings(ks)
	return strings.Join(ks, ", ")
}
