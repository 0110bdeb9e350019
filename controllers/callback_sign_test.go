package controllers_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/kits/testkit/builders"
	"github.com/emaildata/emaildata/internal/lists/callback"
)

// testSigningKey is the installation's callback signing key of the suite.
const testSigningKey = "controllers-suite-signing-key-0123456789"

// TestSignedCallbacks: the manager signs a REST list's callback with its
// tenant's key and a kubectl list's with the key of its callbackSecretRef,
// as Standard Webhooks specifies (the reference library verifies them,
// another key does not); a kubectl list without a key is sent unsigned, and
// one whose Secret is missing is never sent unsigned: its attempts fail
// with the Secret named.
func TestSignedCallbacks(t *testing.T) {
	type delivery struct {
		h    http.Header
		body []byte
	}
	got := make(chan delivery, 8)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- delivery{r.Header.Clone(), b}
	}))
	defer recv.Close()
	next := func(t *testing.T) delivery {
		t.Helper()
		select {
		case d := <-got:
			return d
		case <-time.After(20 * time.Second):
			t.Fatal("no callback arrived")
		}
		return delivery{}
	}
	verifies := func(secret string, d delivery) error {
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		return wh.Verify(d.body, d.h)
	}
	other := callback.FormatSecret(bytes.Repeat([]byte{9}, 32))

	t.Run("api list: tenant key", func(t *testing.T) {
		name := uniqueName("cbsig")
		create(t, builders.MakeEmailList(nsLocal, name).APIUpload(putUpload(t, []byte("a@example.com\n")), testTenant).CallbackURL(recv.URL).Obj())
		d := next(t)
		tenant := callback.FormatSecret(callback.TenantKey([]byte(testSigningKey), testTenant))
		if err := verifies(tenant, d); err != nil {
			t.Errorf("the tenant's key does not verify the callback: %v", err)
		}
		if err := verifies(callback.FormatSecret(callback.TenantKey([]byte(testSigningKey), "another-tenant")), d); err == nil {
			t.Error("another tenant's key verifies the callback")
		}
		l := getList(t, nsLocal, name)
		if want := "msg_" + string(l.UID) + "_Results"; d.h.Get(callback.HeaderID) != want {
			t.Errorf("webhook-id %q, want %q", d.h.Get(callback.HeaderID), want)
		}
	})

	t.Run("kubectl list: callbackSecretRef", func(t *testing.T) {
		key := bytes.Repeat([]byte{3}, 32)
		secretName := uniqueName("cbkey")
		create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: nsTeamA, Name: secretName},
			StringData: map[string]string{callback.SecretKeyField: callback.FormatSecret(key) + "\n"}})
		name := uniqueName("cbref")
		createConfigMap(t, nsTeamA, name, "list.csv", "a@example.com\n")
		create(t, builders.MakeEmailList(nsTeamA, name).ConfigMap(name, "list.csv").CallbackURL(recv.URL).CallbackSecret(secretName).Obj())
		d := next(t)
		if err := verifies(callback.FormatSecret(key), d); err != nil {
			t.Errorf("the list's key does not verify the callback: %v", err)
		}
		if err := verifies(other, d); err == nil {
			t.Error("a wrong key verifies the callback")
		}
	})

	t.Run("kubectl list without a key: unsigned", func(t *testing.T) {
		name := uniqueName("cbplain")
		createConfigMap(t, nsTeamA, name, "list.csv", "a@example.com\n")
		create(t, builders.MakeEmailList(nsTeamA, name).ConfigMap(name, "list.csv").CallbackURL(recv.URL).Obj())
		d := next(t)
		for _, h := range []string{callback.HeaderID, callback.HeaderTimestamp, callback.HeaderSignature} {
			if d.h.Get(h) != "" {
				t.Errorf("an unsigned callback carries %s", h)
			}
		}
	})

	t.Run("missing Secret: never unsigned", func(t *testing.T) {
		name := uniqueName("cbmiss")
		createConfigMap(t, nsTeamA, name, "list.csv", "a@example.com\n")
		create(t, builders.MakeEmailList(nsTeamA, name).ConfigMap(name, "list.csv").CallbackURL(recv.URL).CallbackSecret("no-such-key").Obj())
		var l *listsv1.EmailList
		eventually(t, 20*time.Second, "callback given up", func() (bool, string) {
			l = getList(t, nsTeamA, name)
			return l.Status.Callback != nil && l.Status.Callback.State == listsv1.CallbackFailed, ""
		})
		if !strings.Contains(l.Status.Callback.LastError, `Secret `+nsTeamA+`/no-such-key does not exist`) {
			t.Errorf("last error %q, want it to name the missing Secret", l.Status.Callback.LastError)
		}
		select {
		case d := <-got:
			t.Errorf("a callback was sent without its key: %v", d.h)
		default:
		}
	})
}
