package operator

import (
	"bytes"
	"context"
	"os"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/emaildata/emaildata/api/kubescheme"
	"github.com/emaildata/emaildata/internal/platform/installsecret"
)

// countingReader counts the reads by name of an uncached reader.
type countingReader struct {
	client.Reader
	gets atomic.Int64
}

func (r *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.gets.Add(1)
	return r.Reader.Get(ctx, key, obj, opts...)
}

// TestEnsureInstallationSecrets, against a real API server: the missing
// secrets are made (random, immutable, labelled by kind), an existing one
// is never changed whatever it holds (a short key is reported, not
// replaced), an external one is waited for and not made, and a second call
// changes nothing. The start-up step returns once the external one exists.
func TestEnsureInstallationSecrets(t *testing.T) {
	c := startAPIServer(t)
	ctx := context.Background()
	short := bytes.Repeat([]byte("s"), 16)
	key := func(v []byte) map[string][]byte { return map[string][]byte{installsecret.Field: v} }
	all := func(state string) map[installsecret.Kind]string {
		out := map[installsecret.Kind]string{}
		for _, s := range installsecret.Specs() {
			out[s.Kind] = state
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		existing map[installsecret.Kind]map[string][]byte // Secrets there before, by kind
		cfg      installsecret.Config
		// want: what each kind ends as: "created", "kept", "unusable", "missing".
		want map[installsecret.Kind]string
	}{
		{name: "none", want: all("created")},
		{name: "some there, one short, one of before", existing: map[installsecret.Kind]map[string][]byte{
			installsecret.ListIDKey: key(bytes.Repeat([]byte{7}, 32)), installsecret.CallbackSigning: key(short),
			// The history key Secret the chart or config/default made before.
			installsecret.HistoryKey: {installsecret.LegacyHistoryField: []byte("a-history-key-made-by-the-chart-before")}},
			want: map[installsecret.Kind]string{installsecret.ListIDKey: "kept", installsecret.CallbackSigning: "unusable",
				installsecret.HistoryKey: "kept", installsecret.FraudHistoryKey: "created"}},
		{name: "brought history keys", existing: map[installsecret.Kind]map[string][]byte{
			installsecret.HistoryKey: key([]byte("vault-history-key-0001\n")), installsecret.FraudHistoryKey: key([]byte("vault-fraud-key-00001"))},
			cfg: installsecret.Config{External: []installsecret.Kind{installsecret.HistoryKey, installsecret.FraudHistoryKey}},
			want: map[installsecret.Kind]string{installsecret.ListIDKey: "created", installsecret.CallbackSigning: "created",
				installsecret.HistoryKey: "kept", installsecret.FraudHistoryKey: "kept"}},
		{name: "external, renamed", cfg: installsecret.Config{
			Names: map[installsecret.Kind]string{installsecret.ListIDKey: "mail-ids-key", installsecret.CallbackSigning: "vault-signing",
				installsecret.HistoryKey: "vault-history", installsecret.FraudHistoryKey: "mail-fraud"},
			External: []installsecret.Kind{installsecret.CallbackSigning, installsecret.HistoryKey}},
			want: map[installsecret.Kind]string{installsecret.ListIDKey: "created", installsecret.CallbackSigning: "missing",
				installsecret.HistoryKey: "missing", installsecret.FraudHistoryKey: "created"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := "is-" + strings.ReplaceAll(tc.name, ",", "")
			ns = strings.ReplaceAll(ns, " ", "-")
			if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.existing {
				if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tc.cfg.Name(k)}, Data: v}); err != nil {
					t.Fatal(err)
				}
			}
			states, err := EnsureInstallationSecrets(ctx, c, c, ns, tc.cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(states) != len(installsecret.Specs()) {
				t.Fatalf("%d states for %d kinds", len(states), len(installsecret.Specs()))
			}
			first := map[installsecret.Kind]map[string][]byte{}
			for _, st := range states {
				got := map[bool]string{true: "created"}[st.Created]
				switch {
				case st.Missing:
					got = "missing"
				case st.Unusable != "":
					got = "unusable"
				case got == "":
					got = "kept"
				}
				if got != tc.want[st.Kind] || st.Name != tc.cfg.Name(st.Kind) {
					t.Errorf("%s (%s): %s, want %s", st.Kind, st.Name, got, tc.want[st.Kind])
				}
				var sec corev1.Secret
				err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: st.Name}, &sec)
				if got == "missing" {
					if err == nil {
						t.Errorf("%s: the external Secret was made", st.Kind)
					}
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				first[st.Kind] = sec.Data
				if want, ok := tc.existing[st.Kind]; ok && !reflect.DeepEqual(sec.Data, want) {
					t.Errorf("%s: an existing Secret was changed", st.Kind)
				}
				if got == "created" {
					spec, _ := installsecret.Lookup(st.Kind)
					if _, err := spec.Key(sec.Data); err != nil || sec.Immutable == nil || !*sec.Immutable ||
						sec.Labels["app.kubernetes.io/component"] != string(st.Kind) || len(sec.Data) != 1 {
						t.Errorf("%s: made %d bytes (%v), immutable %v, labels %v", st.Kind, len(sec.Data[installsecret.Field]), err, sec.Immutable, sec.Labels)
					}
				}
			}
			seen := map[string]installsecret.Kind{}
			for k, data := range first {
				if v := string(data[installsecret.Field]); v != "" {
					if other, dup := seen[v]; dup {
						t.Errorf("%s and %s hold the same key", k, other)
					}
					seen[v] = k
				}
			}
			// Again: nothing changes.
			again, err := EnsureInstallationSecrets(ctx, c, c, ns, tc.cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, st := range again {
				var sec corev1.Secret
				if st.Created || c.Get(ctx, client.ObjectKey{Namespace: ns, Name: st.Name}, &sec) == nil && !reflect.DeepEqual(sec.Data, first[st.Kind]) {
					t.Errorf("%s: changed by a second call", st.Kind)
				}
			}
		})
	}

	t.Run("start-up waits for an external secret", func(t *testing.T) {
		const ns = "is-waits"
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
		cfg := installsecret.Config{External: []installsecret.Kind{installsecret.CallbackSigning}}
		reader := &countingReader{Reader: c}
		step := &installationSecrets{reader: reader, writer: c, namespace: ns, cfg: cfg, interval: 10 * time.Millisecond}
		if !step.NeedLeaderElection() {
			t.Error("the step runs on every replica, not only the elected one")
		}
		done := make(chan error, 1)
		go func() { done <- step.Start(ctx) }()
		// Two rounds looked (four reads): it waits, it has not returned.
		deadline := time.Now().Add(30 * time.Second)
		for reader.gets.Load() < 4 {
			if time.Now().After(deadline) {
				t.Fatal("the step did not look again")
			}
			time.Sleep(5 * time.Millisecond)
		}
		select {
		case err := <-done:
			t.Fatalf("the step returned (%v) while the external Secret was missing", err)
		default:
		}
		if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cfg.Name(installsecret.CallbackSigning)},
			Data: map[string][]byte{installsecret.Field: bytes.Repeat([]byte{3}, 40)}}); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the step still waits once the Secret exists")
		}
	})
}

// startAPIServer starts a kube-apiserver and etcd for one test and returns
// a client of it.
func startAPIServer(t *testing.T) client.Client {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set; run the tests with `make test`")
	}
	env := &envtest.Environment{}
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	c, err := client.New(cfg, client.Options{Scheme: kubescheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
