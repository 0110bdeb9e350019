package restapi_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/emaildata/emaildata/internal/lists/listid"
)

// TestListIDsDoNotCount: list IDs are integers that tell a tenant nothing
// about other tenants' lists. Between two of acme's submissions globex
// submits three lists: the counter moves by 5, but acme's IDs do not show
// it (with the counter's own values they would differ by exactly 4), and
// each ID still names its list, for its tenant only.
func TestListIDsDoNotCount(t *testing.T) {
	ctx := context.Background()
	counter := func() int64 {
		var cm corev1.ConfigMap
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: nsSystem, Name: listid.DefaultConfigMap}, &cm); err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.ParseInt(cm.Data["last"], 10, 64)
		return n
	}
	rows := []byte("a@example.com\n")
	// Other tests submit lists too: retry until no other list came between.
	for attempt := 0; ; attempt++ {
		start := counter()
		first := listID(t, submit(t, keyAcme, nil, "first.csv", rows))
		for i := 0; i < 3; i++ {
			listID(t, submit(t, keyGlobex, nil, fmt.Sprintf("g%d.csv", i), rows))
		}
		second := listID(t, submit(t, keyAcme, nil, "second.csv", rows))
		if moved := counter() - start; moved != 5 {
			if attempt < 5 {
				continue
			}
			t.Fatalf("the counter moved by %d during the test, want 5", moved)
		}
		for _, id := range []int64{first, second} {
			if id < listid.PermutedBase || id >= 2*listid.PermutedBase {
				t.Errorf("list ID %d is outside [2^40, 2^41)", id)
			}
		}
		if second-first == 4 || first-second == 4 {
			t.Errorf("acme's IDs %d and %d count globex's 3 lists between them", first, second)
		}
		for _, id := range []int64{first, second} {
			if r := do(t, newRequest(t, http.MethodGet, fmt.Sprintf("/v5/list/%d", id), keyAcme, nil, "")); r.code != http.StatusOK {
				t.Errorf("GET list %d as acme: %d", id, r.code)
			}
			if r := do(t, newRequest(t, http.MethodGet, fmt.Sprintf("/v5/list/%d", id), keyGlobex, nil, "")); r.code != http.StatusNotFound {
				t.Errorf("GET acme's list %d as globex: %d", id, r.code)
			}
		}
		waitStatus(t, keyAcme, second, "Results")
		return
	}
}
