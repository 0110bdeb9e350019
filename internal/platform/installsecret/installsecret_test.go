package installsecret

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
)

// The table names each kind once, with a distinct Secret, a flag per
// kind, and keys long enough to be keys.
func TestSpecs(t *testing.T) {
	kinds, names := map[Kind]bool{}, map[string]bool{}
	for _, s := range Specs() {
		if kinds[s.Kind] || names[s.Name(DefaultPrefix)] {
			t.Errorf("%s: kind or name %q repeated", s.Kind, s.Name(DefaultPrefix))
		}
		kinds[s.Kind], names[s.Name(DefaultPrefix)] = true, true
		if s.Bytes < s.MinBytes || s.MinBytes < 32 || s.Usage == "" {
			t.Errorf("%s: makes %d bytes, accepts %d, usage %q", s.Kind, s.Bytes, s.MinBytes, s.Usage)
		}
		if got, ok := Lookup(s.Kind); !ok || got.Suffix != s.Suffix {
			t.Errorf("Lookup(%s) = %+v %v", s.Kind, got, ok)
		}
		if s.Labels()["app.kubernetes.io/component"] != string(s.Kind) {
			t.Errorf("%s: labels %v", s.Kind, s.Labels())
		}
	}
	// The names config/default and the chart's release "emaildata" use.
	for k, want := range map[Kind]string{ListIDKey: "emaildata-list-ids-key", CallbackSigning: "emaildata-callback-signing"} {
		if got := (Config{}).Name(k); got != want {
			t.Errorf("default name of %s: %q, want %q", k, got, want)
		}
		if got := k.Flag(); got != string(k)+"-secret" {
			t.Errorf("flag of %s: %q", k, got)
		}
	}
	if _, ok := Lookup("history-key"); ok {
		t.Error("Lookup found a kind the table lacks")
	}
}

// Make reads the key from the reader given (crypto/rand in production)
// and fails rather than make a short key; Key takes a key at least
// MinBytes long and names, never shows, what is wrong.
func TestMakeAndKey(t *testing.T) {
	spec, _ := Lookup(ListIDKey)
	src := bytes.Repeat([]byte{0xA5}, spec.Bytes)
	data, err := spec.Make(bytes.NewReader(src))
	if err != nil || !bytes.Equal(data[Field], src) || len(data) != 1 {
		t.Fatalf("Make: %v %v", data, err)
	}
	if _, err := spec.Make(bytes.NewReader(src[:spec.Bytes-1])); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("Make from a short reader: %v, want an error", err)
	}
	secret := strings.Repeat("s", spec.MinBytes-1)
	for _, tc := range []struct {
		name string
		data map[string][]byte
		ok   bool
	}{
		{"made", data, true},
		{"exactly the minimum", map[string][]byte{Field: bytes.Repeat([]byte{1}, spec.MinBytes)}, true},
		{"one byte short", map[string][]byte{Field: []byte(secret)}, false},
		{"no field", map[string][]byte{"other": src}, false},
		{"empty", nil, false},
	} {
		k, err := spec.Key(tc.data)
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok=%v", tc.name, err, tc.ok)
			continue
		}
		if err != nil && (!errors.Is(err, ErrUnusable) || strings.Contains(err.Error(), secret)) {
			t.Errorf("%s: %v: want ErrUnusable, without the value", tc.name, err)
		}
		if err == nil && !bytes.Equal(k, tc.data[Field]) {
			t.Errorf("%s: key %q", tc.name, k)
		}
	}
}

// The flags: one name per kind (the manager's and the API's), and the
// manager's --external-secrets, whose unknown kinds are refused by name.
func TestFlags(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		names    map[Kind]string
		external []Kind
		err      string
	}{
		{args: nil, names: map[Kind]string{ListIDKey: "emaildata-list-ids-key", CallbackSigning: "emaildata-callback-signing"}},
		{args: []string{"--list-id-key-secret=mail-ids", "--callback-signing-secret=vault-signing", "--external-secrets=callback-signing"},
			names: map[Kind]string{ListIDKey: "mail-ids", CallbackSigning: "vault-signing"}, external: []Kind{CallbackSigning}},
		{args: []string{"--external-secrets= list-id-key , callback-signing,"}, external: []Kind{ListIDKey, CallbackSigning}},
		{args: []string{"--external-secrets=history-key"}, err: `unknown installation secret "history-key"`},
		{args: []string{"--callback-signing-secret="}, err: "a Secret name is needed"},
	} {
		var c Config
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		c.BindFlags(fs)
		c.BindManagerFlags(fs)
		err := fs.Parse(tc.args)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: %v, want %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		for k, want := range tc.names {
			if got := c.Name(k); got != want {
				t.Errorf("%v: %s named %q, want %q", tc.args, k, got, want)
			}
		}
		if !slices.Equal(c.External, tc.external) {
			t.Errorf("%v: external %v, want %v", tc.args, c.External, tc.external)
		}
		for _, s := range Specs() {
			if c.Creates(s.Kind) == slices.Contains(tc.external, s.Kind) {
				t.Errorf("%v: Creates(%s) = %v", tc.args, s.Kind, c.Creates(s.Kind))
			}
		}
	}
}
