package restapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/platform/installsecret"
	"github.com/emaildata/emaildata/internal/restapi"
)

// TestSubmitWaitsForListIDKey: the API never makes the list ID key (the
// elected manager does). Until it exists an upload is refused with 503
// ListIDsUnavailable and a Retry-After, as openapi.json says, naming no
// Secret, and the uploaded file is not kept; once the Secret exists the
// same server accepts the list.
func TestSubmitWaitsForListIDKey(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const keyName, counter = "submit-test-list-ids-key", "submit-test-list-ids"
	st, err := blobstore.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	addr, err := startAPIStore(ctx, restapi.Config{}, st, func(o *restapi.RunOptions) {
		o.ListIDConfigMap = counter
		o.Secrets.Names = map[installsecret.Kind]string{installsecret.ListIDKey: keyName}
	})
	if err != nil {
		t.Fatal(err)
	}
	post := func() response {
		body, ct := multipartFile(t, "a.csv", []byte("email\nann@good.test\n"))
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v5/list?"+q("service", "email_validation").Encode(), strings.NewReader(string(body)))
		req.Header.Set("api_key", keyAcme)
		req.Header.Set("Content-Type", ct)
		return do(t, req)
	}
	r := post()
	if r.code != http.StatusServiceUnavailable || r.json(t)["error"] != "ListIDsUnavailable" ||
		r.header.Get("Retry-After") == "" || strings.Contains(string(r.body), keyName) {
		t.Fatalf("without the key: %d %v %s", r.code, r.header, r.body)
	}
	if n, err := st.Count(ctx, blobstore.UploadsFolder); err != nil || n != 0 {
		t.Errorf("%d uploads kept after the refusal (%v)", n, err)
	}

	spec, _ := installsecret.Lookup(installsecret.ListIDKey)
	data, err := spec.Make(strings.NewReader(strings.Repeat("k", spec.Bytes)))
	if err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: nsSystem, Name: keyName}, Data: data}); err != nil {
		t.Fatal(err)
	}
	if r := post(); r.code != http.StatusAccepted {
		t.Fatalf("with the key: %d %s", r.code, r.body)
	}
}
