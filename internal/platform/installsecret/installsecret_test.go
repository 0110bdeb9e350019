package installsecret

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"
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
		// A made key has 32 random bytes at least and passes its own check;
		// a brought one needs 16 at least (the verification history's
		// minimum, evhistory.MinSecretBytes).
		if s.Bytes < 32 || s.Bytes < s.MinBytes || s.MinBytes < 16 || s.Usage == "" {
			t.Errorf("%s: makes %d bytes, accepts %d, usage %q", s.Kind, s.Bytes, s.MinBytes, s.Usage)
		}
		if got, ok := Lookup(s.Kind); !ok || got.Suffix != s.Suffix {
			t.Errorf("Lookup(%s) = %+v %v", s.Kind, got, ok)
		}
		if s.Labels()["app.kubernetes.io/component"] != string(s.Kind) {
			t.Errorf("%s: labels %v", s.Kind, s.Labels())
		}
	}
	// The names config/default and the chart's release "emaildata" use;
	// the history key's is the one the chart and config/default gave it
	// before it was an installation secret, so an upgrade finds it.
	for k, want := range map[Kind]string{ListIDKey: "emaildata-list-ids-key", CallbackSigning: "emaildata-callback-signing",
		HistoryKey: "emaildata-history-key", FraudHistoryKey: "emaildata-fraud-history-key"} {
		if got := (Config{}).Name(k); got != want {
			t.Errorf("default name of %s: %q, want %q", k, got, want)
		}
		if got := k.Flag(); got != string(k)+"-secret" {
			t.Errorf("flag of %s: %q", k, got)
		}
	}
	if _, ok := Lookup("history"); ok {
		t.Error("Lookup found a kind the table lacks")
	}
	// The keys that travel to worker pods as environment variables are
	// text; the history key reads its Secrets of before.
	for k, text := range map[Kind]bool{ListIDKey: false, CallbackSigning: false, HistoryKey: true, FraudHistoryKey: true} {
		if s, _ := Lookup(k); s.Text != text {
			t.Errorf("%s: Text %v, want %v", k, s.Text, text)
		}
	}
	if s, _ := Lookup(HistoryKey); s.LegacyField != "HISTORY_KEY" {
		t.Errorf("history key legacy field %q", s.LegacyField)
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
		{args: []string{"--history-key-secret=vault-history", "--fraud-history-key-secret=vault-fraud", "--external-secrets=history-key,fraud-history-key"},
			names:    map[Kind]string{HistoryKey: "vault-history", FraudHistoryKey: "vault-fraud", ListIDKey: "emaildata-list-ids-key"},
			external: []Kind{HistoryKey, FraudHistoryKey}},
		{args: []string{"--external-secrets=history"}, err: `unknown installation secret "history"`},
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

// Text kinds (the history keys, which reach worker pods as environment
// variables): a made key is its random bytes in hex; a brought one is
// trimmed as evhistory.LoadSecret trims $HISTORY_KEY, must be printable,
// and is measured after the trim; the history key reads the field its
// Secrets had before they were installation secrets when "key" is absent.
func TestTextKeys(t *testing.T) {
	spec, _ := Lookup(HistoryKey)
	data, err := spec.Make(bytes.NewReader(bytes.Repeat([]byte{0xA5, 0x00}, spec.Bytes)))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(data[Field]), strings.Repeat("a500", spec.Bytes/2); got != want {
		t.Fatalf("made %q, want %q", got, want)
	}
	min := strings.Repeat("k", spec.MinBytes)
	for _, tc := range []struct {
		name  string
		data  map[string][]byte
		field string
		key   string // "" for an error
		err   string
	}{
		{"made", data, Field, string(data[Field]), ""},
		{"trimmed", map[string][]byte{Field: []byte("  " + min + "\n")}, Field, min, ""},
		{"legacy field", map[string][]byte{LegacyHistoryField: []byte(min + "\n")}, LegacyHistoryField, min, ""},
		{"key wins over legacy", map[string][]byte{Field: []byte(min + "-new"), LegacyHistoryField: []byte(min + "-old")}, Field, min + "-new", ""},
		{"short after trim", map[string][]byte{Field: []byte(min[1:] + "\n\n")}, Field, "", "holds 15 bytes, at least 16"},
		{"NUL inside", map[string][]byte{Field: []byte(min + "\x00" + min)}, Field, "", "control character at byte 16"},
		{"tab inside", map[string][]byte{LegacyHistoryField: []byte(min + "\t" + min)}, LegacyHistoryField, "", "control character"},
		{"neither field", map[string][]byte{"HISTORY": []byte(min)}, Field, "", `field "key" holds 0 bytes`},
	} {
		field, key, err := spec.Find(tc.data)
		switch {
		case tc.err != "":
			if err == nil || !errors.Is(err, ErrUnusable) || !strings.Contains(err.Error(), tc.err) || strings.Contains(err.Error(), min) {
				t.Errorf("%s: %v, want ErrUnusable %q without the value", tc.name, err, tc.err)
			}
		case err != nil || field != tc.field || string(key) != tc.key:
			t.Errorf("%s: field %q key %q (%v), want %q %q", tc.name, field, key, err, tc.field, tc.key)
		}
	}
	// Binary kinds are taken as they are: no trim, any byte.
	bin, _ := Lookup(ListIDKey)
	raw := append(bytes.Repeat([]byte{0}, bin.MinBytes-1), '\n')
	if k, err := bin.Key(map[string][]byte{Field: raw}); err != nil || !bytes.Equal(k, raw) {
		t.Errorf("binary key %v (%v), want it untouched", k, err)
	}
}

// Await reads a key by name through fetch: while the Secret is missing or
// a read fails it says so and looks again; a Secret found unusable is an
// error at once (never waited on: nothing replaces it); ctx ends the wait.
func TestAwait(t *testing.T) {
	spec, _ := Lookup(FraudHistoryKey)
	good := map[string][]byte{Field: []byte(strings.Repeat("f", 64))}
	type answer struct {
		data  map[string][]byte
		found bool
		err   error
	}
	missing, failing := answer{}, answer{err: errors.New("connection refused")}
	for _, tc := range []struct {
		name    string
		answers []answer
		// waits: the waiting calls, by their reason; err: Await's error.
		waits []string
		err   string
	}{
		{"there", []answer{{good, true, nil}}, nil, ""},
		{"made later", []answer{missing, failing, missing, {good, true, nil}},
			[]string{ErrMissing.Error(), "connection refused", ErrMissing.Error()}, ""},
		{"unusable", []answer{missing, {map[string][]byte{Field: []byte("short")}, true, nil}},
			[]string{ErrMissing.Error()}, "holds 5 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var names []string
			fetch := func(_ context.Context, name string) (map[string][]byte, bool, error) {
				names = append(names, name)
				a := tc.answers[len(names)-1]
				return a.data, a.found, a.err
			}
			var waits []string
			c := Config{Names: map[Kind]string{FraudHistoryKey: "vault-fraud"}}
			l, err := c.Await(context.Background(), FraudHistoryKey, fetch, time.Nanosecond, func(name string, why error) {
				if name != "vault-fraud" {
					t.Errorf("waiting for %q", name)
				}
				waits = append(waits, why.Error())
			})
			if !slices.Equal(waits, tc.waits) || len(names) != len(tc.answers) {
				t.Errorf("waits %q after %d reads, want %q after %d", waits, len(names), tc.waits, len(tc.answers))
			}
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "vault-fraud") {
					t.Errorf("err %v, want %q naming the Secret", err, tc.err)
				}
				return
			}
			if err != nil || l.Name != "vault-fraud" || l.Field != Field || l.Kind != FraudHistoryKey || !bytes.Equal(l.Key, good[Field]) {
				t.Fatalf("loaded %v %q (%v)", l, l.Key, err)
			}
			// What a log or an error shows of it names the Secret, not the key.
			for _, shown := range []string{l.String(), fmt.Sprint(l), l.LogValue().String()} {
				if strings.Contains(shown, string(good[Field])) || !strings.Contains(shown, "vault-fraud") {
					t.Errorf("shown as %q", shown)
				}
			}
		})
	}
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		reads := 0
		_, err := Config{}.Await(ctx, spec.Kind, func(context.Context, string) (map[string][]byte, bool, error) {
			if reads++; reads == 3 {
				cancel()
			}
			return nil, false, nil
		}, time.Nanosecond, nil)
		if !errors.Is(err, context.Canceled) || reads != 3 {
			t.Errorf("after %d reads: %v, want context.Canceled after 3", reads, err)
		}
	})
	if _, err := (Config{}).Await(context.Background(), "history", nil, 0, nil); err == nil {
		t.Error("Await of an unknown kind")
	}
}
