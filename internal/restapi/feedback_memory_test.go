package restapi_test

import (
	"bufio"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emaildata/emaildata/internal/restapi"
)

// maximalFeedback writes a feedback file of rows reports (about 15 bytes
// a row: 10^6 rows make 15 MB, under the 16 MiB limit) into a multipart
// body as it is read, so that the client holds none of it.
func maximalFeedback(rows int) (io.Reader, string) {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		fw, err := mw.CreateFormFile("file", "feedback.tsv")
		if err != nil {
			pw.CloseWithError(err)
			return
		}
		bw := bufio.NewWriterSize(fw, 64<<10)
		bw.WriteString("email\tfraud_type\n")
		for i := range rows {
			local := strconv.FormatInt(int64(36*36*36+i), 36) // 4 characters
			bw.WriteString(local)
			bw.WriteString("@ex.io\tbot\n")
		}
		if err := bw.Flush(); err != nil {
			pw.CloseWithError(err)
			return
		}
		pw.CloseWithError(mw.Close())
	}()
	return pr, mw.FormDataContentType()
}

// goMem reads the Go heap's objects and what the Go runtime holds from
// the OS (all its memory classes but the heap released back).
func goMem() (heap, held int64) {
	s := []metrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
	}
	metrics.Read(s)
	return int64(s[0].Value.Uint64()), int64(s[1].Value.Uint64() - s[2].Value.Uint64())
}

// TestFeedbackMaximalFilesMemory sends 4 maximal feedback files (10^6
// rows, 15 MB each) at once, from 4 tenants, to a real API whose feedback
// is kept in PostgreSQL or Redis, and measures the test process while the
// API records them: the peaks of its resident set (VmRSS sampled every 10
// ms, and VmHWM), of the Go heap's objects and of what the Go runtime
// holds from the OS, against their level before. The process holds the
// API, the manager and envtest's clients; the growth is the API's. It
// fails when the resident set grows by 64 MiB or more. A load test:
//
//	EMAILDATA_LOAD=1 CI=true KUBEBUILDER_ASSETS=... go test ./internal/restapi/ -run TestFeedbackMaximalFilesMemory -v
func TestFeedbackMaximalFilesMemory(t *testing.T) {
	loadOnly(t)
	const files, rows, limit = 4, 1_000_000, 64 << 20
	for _, store := range []string{"postgres", "redis"} {
		t.Run(store, func(t *testing.T) {
			base := fraudAPI(t, store, "", restapi.Config{})
			runtime.GC()
			rssBefore := rss(t, "VmRSS")
			heapBefore, heldBefore := goMem()
			hwmReset := resetPeakRSS()
			var peakRSS, peakHeap, peakHeld int64
			stop, sampled := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(sampled)
				tick := time.NewTicker(10 * time.Millisecond)
				defer tick.Stop()
				for {
					h, held := goMem()
					peakRSS, peakHeap, peakHeld = max(peakRSS, rss(t, "VmRSS")), max(peakHeap, h), max(peakHeld, held)
					select {
					case <-stop:
						return
					case <-tick.C:
					}
				}
			}()
			start := time.Now()
			var wg sync.WaitGroup
			errs := make(chan string, files)
			for i := range files {
				wg.Add(1)
				go func() {
					defer wg.Done()
					body, ct := maximalFeedback(rows)
					u := base + "/feedback/v1?" + url.Values{"api_key": {fraudKey(fraudTenants[i])}}.Encode()
					req, _ := http.NewRequest(http.MethodPost, u, body)
					req.Header.Set("Content-Type", ct)
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						errs <- err.Error()
						return
					}
					defer resp.Body.Close()
					got, _ := io.ReadAll(resp.Body)
					if resp.StatusCode != http.StatusOK || !strings.Contains(string(got), fmt.Sprintf(`"total_records":%d,"skipped_records":0`, rows)) {
						errs <- fmt.Sprintf("%d %s", resp.StatusCode, got)
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			close(stop)
			<-sampled
			hwm := rss(t, "VmHWM")
			if !hwmReset {
				hwm = peakRSS
			}
			close(errs)
			for e := range errs {
				t.Errorf("feedback file: %s", e)
			}
			// Every report counts: one of each file, seen by its tenant.
			for i := range files {
				c := tenantClient{t, base, fraudTenants[i]}
				if a := c.fr("email", strconv.FormatInt(36*36*36+rows-1, 36)+"@ex.io"); !a.has("email_reported") {
					t.Errorf("%s's last report does not count", fraudTenants[i])
				}
			}
			t.Logf("%s: %d files of %d rows (%d MB each) at once in %s", store, files, rows, 15, elapsed.Round(time.Millisecond))
			t.Logf("RSS %.1f MiB before, peak %.1f MiB (VmHWM %.1f MiB): growth %.1f MiB; Go heap objects %.1f -> peak %.1f MiB; Go runtime held %.1f -> peak %.1f MiB",
				mib(rssBefore), mib(peakRSS), mib(hwm), mib(max(peakRSS, hwm)-rssBefore), mib(heapBefore), mib(peakHeap), mib(heldBefore), mib(peakHeld))
			if growth := max(peakRSS, hwm) - rssBefore; growth >= limit {
				t.Errorf("RSS grew by %.1f MiB recording 4 maximal files, want under %.0f MiB", mib(growth), mib(limit))
			}
		})
	}
}
