package restapi_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"gocloud.dev/blob"
	"sigs.k8s.io/controller-runtime/pkg/client"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/restapi"
)

// TestConcurrentUploads: parallel submissions get distinct list IDs and
// all complete.
func TestConcurrentUploads(t *testing.T) {
	const n = 12
	ids := make([]int64, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			data := []byte(fmt.Sprintf("user%d@example.com\n", i))
			ids[i] = listID(t, submit(t, keyGlobex, q("name", fmt.Sprintf("c%d.csv", i)), "c.csv", data))
		}()
	}
	wg.Wait()
	seen := map[int64]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Fatalf("list id %d handed out twice: %v", id, ids)
		}
		seen[id] = true
	}
	for _, id := range ids {
		waitStatus(t, keyGlobex, id, "Results")
	}
}

// countState counts the tenant-independent evidence of a submission: lists
// and uploaded objects.
func countState(t *testing.T) (lists, uploads int) {
	t.Helper()
	var ls listsv1.EmailListList
	if err := k8s.List(context.Background(), &ls, client.InNamespace(nsSystem)); err != nil {
		t.Fatal(err)
	}
	it := store.List(&blob.ListOptions{Prefix: "uploads/"})
	for {
		obj, err := it.Next(context.Background())
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		uploads++
		_ = obj
	}
	return len(ls.Items), uploads
}

// TestAbortedUploadLeavesNothing: a client (or a server crash) cutting an
// upload short leaves no list and no object behind.
func TestAbortedUploadLeavesNothing(t *testing.T) {
	listsBefore, uploadsBefore := countState(t)
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/v5/list?name=half.csv", pr)
	req.Header.Set("api_key", keyAcme)
	req.Header.Set("Content-Type", "text/csv")
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			t.Errorf("the aborted upload got an answer: %d", resp.StatusCode)
		}
	}()
	_, _ = pw.Write([]byte(strings.Repeat("someone@example.com\n", 2000)))
	time.Sleep(200 * time.Millisecond) // the server is mid-upload
	cancel()
	_ = pw.CloseWithError(io.ErrUnexpectedEOF)
	<-done
	time.Sleep(300 * time.Millisecond)
	listsAfter, uploadsAfter := countState(t)
	if listsAfter != listsBefore || uploadsAfter != uploadsBefore {
		t.Fatalf("aborted upload left state: lists %d→%d, uploads %d→%d", listsBefore, listsAfter, uploadsBefore, uploadsAfter)
	}
}

// TestGracefulShutdownDrainsUploads: stopping a server while an upload is
// in flight lets that upload finish and create its list.
func TestGracefulShutdownDrainsUploads(t *testing.T) {
	ctx, stop := context.WithCancel(context.Background())
	addr, err := startAPI(ctx, restapi.Config{})
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v5/list?name=drain.csv", pr)
	req.Header.Set("api_key", keyAcme)
	req.Header.Set("Content-Type", "text/csv")
	type result struct {
		code int
		body string
		err  error
	}
	res := make(chan result, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			res <- result{err: err}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		res <- result{code: resp.StatusCode, body: string(b)}
	}()
	_, _ = pw.Write([]byte("first@example.com\n"))
	time.Sleep(200 * time.Millisecond)
	stop() // the server starts draining with the upload in flight
	time.Sleep(300 * time.Millisecond)
	_, _ = pw.Write([]byte("second@example.com\n"))
	_ = pw.Close()
	r := <-res
	if r.err != nil || r.code != http.StatusAccepted {
		t.Fatalf("in-flight upload during shutdown: %v %d %s", r.err, r.code, r.body)
	}
	var id int64
	if _, err := fmt.Sscanf(r.body, `{"list_id":%d`, &id); err != nil {
		t.Fatalf("body %q", r.body)
	}
	st := waitStatus(t, keyAcme, id, "Results")
	if st["records"] != float64(2) {
		t.Errorf("records %v, want both rows", st["records"])
	}
	// New connections are refused once drained.
	if _, err := http.Get("http://" + addr + "/healthz"); err == nil {
		t.Errorf("the stopped server still accepts connections")
	}
}
