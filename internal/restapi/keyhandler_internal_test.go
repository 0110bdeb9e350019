package restapi

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/emaildata/emaildata/internal/platform/apikey"
)

// TestKeyHandlerLogsClashes: the API logs which Secrets hold one key with
// different meanings (names and what differs, never the key), refuses the
// key, and logs again when the clash is over.
func TestKeyHandlerLogsClashes(t *testing.T) {
	const key = "the-secret-key-string-0001"
	sec := func(name, tenant, services string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: name},
			Data: map[string][]byte{"key": []byte(key), "tenant": []byte(tenant), "services": []byte(services)}}
	}
	var logs bytes.Buffer
	keys := apikey.NewStore()
	h := keyHandler(keys, slog.New(slog.NewTextHandler(&logs, nil)))

	h.OnAdd(sec("a", "acme", "fraud"), true)
	h.OnAdd(sec("a-copy", "acme", "fraud"), true) // an agreeing copy: no clash
	if _, ok := keys.Lookup(key); !ok || strings.Contains(logs.String(), "disagree") {
		t.Fatalf("an agreeing copy refused the key or was logged as a clash:\n%s", logs.String())
	}
	h.OnAdd(sec("b", "globex", "fraud"), true)
	out := logs.String()
	if _, ok := keys.Lookup(key); ok {
		t.Error("a key held by two tenants' Secrets resolves")
	}
	for _, want := range []string{"level=WARN", "ops/a, ops/a-copy, ops/b", "differ=tenant"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, key) {
		t.Errorf("the log reveals the key:\n%s", out)
	}

	logs.Reset()
	h.OnDelete(sec("b", "globex", "fraud"))
	if k, ok := keys.Lookup(key); !ok || k.Tenant != "acme" {
		t.Errorf("after b went: %+v %v", k, ok)
	}
	if out := logs.String(); !strings.Contains(out, "no longer clash") || !strings.Contains(out, "ops/a, ops/a-copy, ops/b") {
		t.Errorf("the end of the clash is not logged:\n%s", out)
	}
}
