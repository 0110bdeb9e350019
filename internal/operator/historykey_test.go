package operator

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/emaildata/emaildata/internal/engine/evhistory"
	"github.com/emaildata/emaildata/internal/platform/installsecret"
	"github.com/emaildata/emaildata/internal/wiring"
)

// TestHistoryKeyAtStart, against a real API server: a manager whose
// engine or workers open the verification history gets its key from the
// installation secret before it starts (historyKey): it makes the Secret
// when missing (elected or not: it needs it before any election), reads
// it by name, and hands its name and field to the worker Jobs; it reads a
// Secret of before (HISTORY_KEY) as it is, waits for one the installer
// brings, and never replaces one. A manager given its own key (make run)
// makes nothing, and refuses to start when its workers would get another.
func TestHistoryKeyAtStart(t *testing.T) {
	c := startAPIServer(t)
	t.Setenv(evhistory.SecretEnv, "")
	ctx := context.Background()
	ownKey := "make-run-local-key-0123456789"
	keyFile := filepath.Join(t.TempDir(), "history-key")
	if err := os.WriteFile(keyFile, []byte(ownKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const defaultName = "emaildata-history-key"
	for _, tc := range []struct {
		name       string
		executor   string
		historyURL string
		keyFile    string
		workersNS  string
		cfg        installsecret.Config
		existing   map[string][]byte // the Secret there before
		// want: the key the engine gets (nil: none set), the Secret and
		// field the Jobs get ("": none), whether a Secret was made, the
		// error ("" none).
		wantKey   []byte
		wantJobs  string
		wantField string
		made      bool
		err       string
	}{
		{name: "no history", executor: ExecutorJob},
		{name: "fresh install, jobs", executor: ExecutorJob, historyURL: "postgres://h/db", made: true, wantJobs: defaultName, wantField: "key"},
		{name: "fresh install, local", executor: ExecutorLocal, historyURL: "redis://r:6379/0", made: true},
		{name: "secret of before", executor: ExecutorJob, historyURL: "postgres://h/db",
			existing: map[string][]byte{"HISTORY_KEY": []byte("made-by-the-chart-before-0123\n")},
			wantKey:  []byte("made-by-the-chart-before-0123"), wantJobs: defaultName, wantField: "HISTORY_KEY"},
		{name: "unusable", executor: ExecutorJob, historyURL: "postgres://h/db",
			existing: map[string][]byte{"key": []byte("too-short")}, err: "holds 9 bytes, at least 16"},
		{name: "own key, workers agree", executor: ExecutorJob, historyURL: "postgres://h/db", keyFile: keyFile,
			existing: map[string][]byte{"key": []byte(ownKey)}, wantJobs: defaultName, wantField: "key"},
		{name: "own key, workers would differ", executor: ExecutorJob, historyURL: "postgres://h/db", keyFile: keyFile,
			existing: map[string][]byte{"key": []byte("another-key-0123456789")}, err: "holds another key than --history-key-file"},
		{name: "own key, no secret", executor: ExecutorJob, historyURL: "postgres://h/db", keyFile: keyFile,
			err: "does not exist yet; make it hold the key this manager has from --history-key-file"},
		{name: "own key, local", executor: ExecutorLocal, historyURL: "postgres://h/db", keyFile: keyFile},
		{name: "workers elsewhere", executor: ExecutorJob, historyURL: "postgres://h/db", workersNS: "batch",
			err: "a pod can take a Secret of its own namespace only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := "hk-" + strings.NewReplacer(" ", "-", ",", "").Replace(tc.name)
			if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
				t.Fatal(err)
			}
			if tc.existing != nil {
				if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: defaultName}, Data: tc.existing}); err != nil {
					t.Fatal(err)
				}
			}
			o := Options{Namespace: ns, Executor: tc.executor, Verify: wiring.DefaultVerifyConfig(), Secrets: tc.cfg, SecretsRecheck: 10 * time.Millisecond}
			o.Verify.HistoryURL, o.Verify.Fleet.URL, o.Verify.HistoryKeyFile, o.Job.Namespace = tc.historyURL, "", tc.keyFile, tc.workersNS
			o.Defaults()
			err := historyKey(ctx, c, c, &o)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || strings.Contains(err.Error(), ownKey) ||
					strings.Contains(err.Error(), "another-key-0123456789") {
					t.Errorf("err %v, want %q without a key", err, tc.err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			var sec corev1.Secret
			getErr := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: defaultName}, &sec)
			switch {
			case tc.existing != nil:
				if getErr != nil || !reflect.DeepEqual(sec.Data, tc.existing) {
					t.Errorf("the Secret there before: %v %v, want it unchanged", sec.Data, getErr)
				}
			case tc.made:
				spec, _ := installsecret.Lookup(installsecret.HistoryKey)
				k, err := spec.Key(sec.Data)
				if getErr != nil || err != nil || sec.Immutable == nil || !*sec.Immutable {
					t.Fatalf("made %v (%v, %v)", sec.Data, getErr, err)
				}
				tc.wantKey = k
			case getErr == nil:
				t.Errorf("a Secret was made: %v", sec.ObjectMeta)
			}
			if tc.err != "" {
				return
			}
			if !bytes.Equal(o.Verify.HistoryKey, tc.wantKey) {
				t.Errorf("engine key %q, want %q", o.Verify.HistoryKey, tc.wantKey)
			}
			if o.Job.HistoryKeySecret != tc.wantJobs || o.Job.HistoryKeyField != tc.wantField {
				t.Errorf("Jobs get %q/%q, want %q/%q", o.Job.HistoryKeySecret, o.Job.HistoryKeyField, tc.wantJobs, tc.wantField)
			}
		})
	}

	t.Run("brought later", func(t *testing.T) {
		const ns, name = "hk-brought", "vault-history"
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
		o := Options{Namespace: ns, Executor: ExecutorJob, Verify: wiring.DefaultVerifyConfig(), SecretsRecheck: 10 * time.Millisecond,
			Secrets: installsecret.Config{Names: map[installsecret.Kind]string{installsecret.HistoryKey: name},
				External: []installsecret.Kind{installsecret.HistoryKey}}}
		o.Verify.HistoryURL = "postgres://h/db"
		o.Defaults()
		reader := &countingReader{Reader: c}
		done := make(chan error, 1)
		go func() { done <- historyKey(ctx, reader, c, &o) }()
		// Several looks (two reads each: ensure, then the key): it waits,
		// and makes nothing.
		deadline := time.Now().Add(30 * time.Second)
		for reader.gets.Load() < 6 {
			if time.Now().After(deadline) {
				t.Fatal("it did not look again")
			}
			time.Sleep(5 * time.Millisecond)
		}
		select {
		case err := <-done:
			t.Fatalf("returned (%v) while the installer's Secret was missing", err)
		default:
		}
		if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Data: map[string][]byte{"key": []byte("from-vault-0123456789\n")}}); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("still waiting once the Secret exists")
		}
		if string(o.Verify.HistoryKey) != "from-vault-0123456789" || o.Job.HistoryKeySecret != name || o.Job.HistoryKeyField != "key" {
			t.Errorf("engine key %q, Jobs %q/%q", o.Verify.HistoryKey, o.Job.HistoryKeySecret, o.Job.HistoryKeyField)
		}
	})
}
