package restapi_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
)

// TestPurchaseChecked: a purchase body is checked whole before anything is
// written (400 naming what is valid, no Purchase object, the list stays
// Processed); a valid purchase says what it delivered, and repeating it
// is idempotent.
func TestPurchaseChecked(t *testing.T) {
	id := listID(t, submit(t, keyReporter, q("action", "report", "delimiter", ","), "checked.txt", []byte("a@x.com\nb@y.org\n")))
	waitStatus(t, keyReporter, id, "Processed")
	purchase := func(body string) response {
		req := newRequest(t, http.MethodPost, fmt.Sprintf("/v5/list/%d/purchase", id), keyReporter, []byte(body), "application/json")
		req.Header.Set("Accept", "application/json")
		return do(t, req)
	}
	bad := []struct{ body, want string }{
		{`{"fields": ["shoe_size"]}`, `unknown field \"shoe_size\"; this list's service delivers: domain`},
		{`{"fields": ["domain"], "colour": 1}`, `the purchase body has unknown name(s) \"colour\"; valid: fields, options`},
		{`{"options": {"email_appendix": {}}}`, `options has unknown name(s) \"email_appendix\"; valid: email_append`},
		{`{"options": {"email_append": {"match_typ": "I"}}}`, `options.email_append has unknown name(s) \"match_typ\"; valid: match_type`},
		{`{"options": {"email_append": {"match_type": "X"}}}`, "must be I or H"},
		{`{"options": {"email_append": {"match_type": "I"}}}`, "match type I applies to email_append lists only"},
		{`{"fields": "domain"}`, "fields must be an array of strings"},
		{`{"fields": [1]}`, "fields must be an array of strings"},
		{`{"fields": []} {"fields": []}`, "has data after its closing brace"},
		{`["domain"]`, "must be a JSON object with any of: fields, options"},
	}
	for _, tc := range bad {
		r := purchase(tc.body)
		if r.code != http.StatusBadRequest || !strings.Contains(string(r.body), tc.want) {
			t.Errorf("%s: %d %s, want 400 with %q", tc.body, r.code, r.body, tc.want)
		}
	}
	l := findList(t, id)
	if l.Status.Phase != listsv1.PhaseProcessed {
		t.Fatalf("a refused purchase moved the list to %s", l.Status.Phase)
	}
	err := k8s.Get(context.Background(), client.ObjectKey{Namespace: l.Namespace, Name: l.Name + "-purchase"}, &listsv1.Purchase{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("a refused purchase wrote a Purchase: %v", err)
	}

	for i := 0; i < 2; i++ {
		r := purchase(`{"fields": ["domain"]}`)
		if r.code != http.StatusOK || !strings.Contains(string(r.body), `"delivered":{"fields":["domain"]}`) {
			t.Fatalf("purchase %d: %d %s", i+1, r.code, r.body)
		}
	}
	// Nothing asked: all of this service's columns, which is what was
	// delivered.
	if r := purchase(""); r.code != http.StatusOK {
		t.Fatalf("repeat without body: %d %s", r.code, r.body)
	}
}

func findList(t *testing.T, id int64) *listsv1.EmailList {
	t.Helper()
	var lists listsv1.EmailListList
	if err := k8s.List(context.Background(), &lists, client.InNamespace(nsSystem)); err != nil {
		t.Fatal(err)
	}
	for i := range lists.Items {
		if lists.Items[i].Status.ListID == id {
			return &lists.Items[i]
		}
	}
	t.Fatalf("list %d not found", id)
	return nil
}
