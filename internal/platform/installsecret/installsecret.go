// Package installsecret names the installation's secrets: keys one
// installation of emaildata makes once and then keeps for its whole life,
// because what was made with them (public list IDs, the callback keys
// tenants configured, the verification and fraud histories' keyed
// digests) must stay valid. It says, for each kind, what the Secret holds
// and how it is made; it imports nothing of Kubernetes, so the domain
// packages that use a key (internal/lists/listid, internal/lists/callback)
// take its name and field from here too.
//
// Who does what with them (docs/install.md, "Installation secrets"):
//
//   - the elected manager creates each missing one in its own namespace
//     when it starts, and never overwrites one (internal/operator). A
//     manager that opens the verification history itself (a history is
//     configured) needs its key before it can start: it makes that one
//     first, elected or not (a create is atomic: a replica that loses the
//     race reads the winner's key), then reads it by name;
//   - an installer may bring its own instead (the chart's
//     installationSecrets.*.existingSecret, the manager's
//     --external-secrets): the manager then only waits for it;
//   - the manager and the API read them by name only (a get, never a
//     list or a watch, Await), so their RBAC grants get on these names
//     alone. Worker pods, which cannot call the API server, get the
//     history key from the kubelet (a secretKeyRef in their Job, never
//     in its args).
//
// No key is rendered by a chart or a manifest: a GitOps tool re-applying
// them never sees, changes or randomises one.
//
// A new kind is one more entry in Specs; the flags, the manager's
// creation, the chart's RBAC (its names are rendered from the same
// suffixes) and the tests follow from the table.
package installsecret

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"time"
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
	// HistoryKey keys the verification history's digests of addresses
	// (internal/engine/evhistory): the manager, the API and the worker
	// pods must share it, or one address is kept under two keys.
	HistoryKey Kind = "history-key"
	// FraudHistoryKey keys the fraud history's digests of identifiers
	// (internal/refdata/fraud), when a durable fraud store is configured:
	// the API replicas must share it.
	FraudHistoryKey Kind = "fraud-history-key"
)

// LegacyHistoryField is the field the verification history's key Secret
// held before it was an installation secret (the chart's lookup-made
// <release>-history-key and config/default's hand-made one, both
// HISTORY_KEY): such a Secret, kept by an upgrade, is read as it is.
const LegacyHistoryField = "HISTORY_KEY"

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
	// Secret brought by the installer may hold (for a Text kind: after
	// white space around it is trimmed).
	Bytes, MinBytes int
	// Text kinds hold printable text: a made key is its random bytes in
	// hex, and a brought one may hold no control character. Their key
	// reaches worker pods as an environment variable (a secretKeyRef),
	// which cannot carry a NUL byte, and is trimmed there as the
	// processes reading the Secret by name trim it (evhistory.LoadSecret),
	// so every process gets the same key.
	Text bool
	// LegacyField, when set, is read when Field is absent: the field of
	// Secrets made before this kind was an installation secret.
	LegacyField string
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
		// 16 bytes: the least evhistory takes (evhistory.MinSecretBytes,
		// checked by internal/wiring's tests); the suffix is the name the
		// chart and config/default gave the Secret before, so an upgrade
		// finds the key it had.
		{Kind: HistoryKey, Suffix: "history-key", Bytes: 32, MinBytes: 16, Text: true, LegacyField: LegacyHistoryField,
			Usage: "the verification history's key, which keys its digests of addresses (the manager, the API and the worker pods share it)"},
		// The fraud history has no minimum of its own; a shared HMAC key
		// gets the verification history's.
		{Kind: FraudHistoryKey, Suffix: "fraud-history-key", Bytes: 32, MinBytes: 16, Text: true,
			Usage: "the fraud history's key, which keys its digests of identifiers when a durable fraud store is configured"},
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
// random (crypto/rand.Reader in production) under Field, in hex for a
// Text kind.
func (s Spec) Make(random io.Reader) (map[string][]byte, error) {
	k := make([]byte, s.Bytes)
	if _, err := io.ReadFull(random, k); err != nil {
		return nil, fmt.Errorf("make %s: %w", s.Kind, err)
	}
	if s.Text {
		k = []byte(hex.EncodeToString(k))
	}
	return map[string][]byte{Field: k}, nil
}

// ErrUnusable wraps why a Secret's data holds no usable key.
var ErrUnusable = errors.New("unusable installation secret")

// Key returns the key held in a Secret's data, or an error naming what is
// wrong (never the value) that wraps ErrUnusable.
func (s Spec) Key(data map[string][]byte) ([]byte, error) {
	_, k, err := s.Find(data)
	return k, err
}

// Find returns the field holding the key in a Secret's data (Field, or
// LegacyField when Field is absent) and the key: for a Text kind trimmed
// of white space around it. Its error names what is wrong, never the
// value, and wraps ErrUnusable.
func (s Spec) Find(data map[string][]byte) (field string, key []byte, err error) {
	field = Field
	if _, ok := data[Field]; !ok && s.LegacyField != "" {
		if _, ok := data[s.LegacyField]; ok {
			field = s.LegacyField
		}
	}
	k := data[field]
	if s.Text {
		k = bytes.TrimSpace(k)
		if i := bytes.IndexFunc(k, func(r rune) bool { return r < 0x20 || r == 0x7f }); i >= 0 {
			return field, nil, fmt.Errorf("%w: %s: field %q holds a control character at byte %d: the key must be printable text (it travels in an environment variable)",
				ErrUnusable, s.Kind, field, i)
		}
	}
	if len(k) < s.MinBytes {
		return field, nil, fmt.Errorf("%w: %s: field %q holds %d bytes, at least %d are needed", ErrUnusable, s.Kind, field, len(k), s.MinBytes)
	}
	return field, k, nil
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
// --callback-signing-secret, --history-key-secret,
// --fraud-history-key-secret): the manager and the API take the same ones.
func (c *Config) BindFlags(fs *flag.FlagSet) {
	if c.Names == nil {
		c.Names = map[Kind]string{}
	}
	for _, s := range Specs() {
		fs.Var(&nameFlag{c: c, kind: s.Kind}, s.Flag(), fmt.Sprintf("Secret in the operator's namespace (namespaces.operator) holding %s in its field %q (default %s)", s.Usage, Field, s.Name(DefaultPrefix)))
	}
}

// nameFlag is the flag naming the Secret of one kind: its value is the
// name given (empty until one is), so that --print-config shows it.
type nameFlag struct {
	c    *Config
	kind Kind
}

func (f *nameFlag) String() string {
	if f == nil || f.c == nil {
		return ""
	}
	return f.c.Names[f.kind]
}

func (f *nameFlag) Set(v string) error {
	if v == "" {
		return errors.New("a Secret name is needed")
	}
	f.c.Names[f.kind] = v
	return nil
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

// ErrMissing: the Secret does not exist (yet).
var ErrMissing = errors.New("the Secret does not exist yet")

// Fetch reads, by name, the data of an installation secret in the
// operator's namespace: found is false when it does not exist (yet).
type Fetch func(ctx context.Context, name string) (data map[string][]byte, found bool, err error)

// Loaded is a key read from its installation secret. String and LogValue
// name the Secret and its field, never the key.
type Loaded struct {
	Kind Kind
	// Name is the Secret's; Field the data key holding the key (Field, or
	// the kind's LegacyField).
	Name, Field string
	Key         []byte
}

func (l Loaded) String() string {
	return fmt.Sprintf("%s (Secret %s, field %q)", l.Kind, l.Name, l.Field)
}

// LogValue keeps the key out of logs.
func (l Loaded) LogValue() slog.Value {
	return slog.GroupValue(slog.String("kind", string(l.Kind)), slog.String("secret", l.Name), slog.String("field", l.Field))
}

// Await reads the key of kind k from the Secret c names, through fetch.
// While the Secret is missing or a read fails it tells waiting (for the
// log: the name and why, ErrMissing when it does not exist) and looks
// again every interval (a second when not positive), until ctx ends. A
// Secret holding no usable key is an error at once: it is never replaced,
// and the installer fixes or deletes it.
func (c Config) Await(ctx context.Context, k Kind, fetch Fetch, every time.Duration, waiting func(name string, why error)) (Loaded, error) {
	spec, ok := Lookup(k)
	if !ok {
		return Loaded{}, fmt.Errorf("unknown installation secret %q (known: %s)", k, kindList())
	}
	if every <= 0 {
		every = time.Second
	}
	name := c.Name(k)
	for {
		data, found, err := fetch(ctx, name)
		if err == nil && found {
			field, key, err := spec.Find(data)
			if err != nil {
				return Loaded{}, fmt.Errorf("installation secret %s: %w", name, err)
			}
			return Loaded{Kind: k, Name: name, Field: field, Key: key}, nil
		}
		if err == nil {
			err = ErrMissing
		}
		if waiting != nil {
			waiting(name, err)
		}
		t := time.NewTimer(every)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
		if ctx.Err() != nil {
			return Loaded{}, fmt.Errorf("installation secret %s: %w (%v)", name, ctx.Err(), err)
		}
	}
}
