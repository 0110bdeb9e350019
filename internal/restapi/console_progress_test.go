package restapi_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// gatedList writes a list of n rows in the sample's columns whose
// addresses are in gatedDomain.
func gatedList(t *testing.T, n int) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("id,first_name,last_name,email\n")
	for i := range n {
		fmt.Fprintf(&b, "%d,First%d,Last%d,person%04d@%s\n", i+1, i, i, i, gatedDomain)
	}
	path := filepath.Join(t.TempDir(), "gated-list.csv")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// restProgress is a list's status and completed_count in its REST status.
func restProgress(t *testing.T, key string, id int64, service string) (string, int64) {
	t.Helper()
	st := restStatus(t, key, id)
	svc, _ := st["services"].(map[string]any)[service].(map[string]any)
	done, _ := svc["completed_count"].(float64)
	status, _ := st["status"].(string)
	return status, int64(done)
}

// checkLiveProgress uploads a list whose checks the test world holds
// (gatedDomain), lets its first shard through and, while the others wait,
// asserts that the console's row shows exactly the REST status's progress
// (a value between none and all) with an estimate of the time left; then
// lets the rest through and sees the row finish.
func checkLiveProgress(t *testing.T, p *page, key string) {
	t.Helper()
	const rows = 120 // about 3.5 kB: several shards of the suite's 1 kB, each one batch
	let, open := gate.close(t)
	defer open()
	id := p.upload(gatedList(t, rows), "email_validation", "process")
	row := fmt.Sprintf(`document.querySelector('#lists-table tr[data-list-id="%d"]')`, id)
	p.wait("the gated list in the lists view", row, 15*time.Second)
	let(1)
	var done int64
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		status, d := restProgress(t, key, id, "email_validation")
		if status == "Processing" && d > 0 {
			done = d
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("list %d: REST status %s, %d done; want part of it done", id, status, d)
		}
	}
	if done >= rows {
		t.Fatalf("one batch through, REST says %d of %d done: the list is not split in shards", done, rows)
	}
	// The console polls with back-off (at most 5 s while a list runs).
	p.wait("the console showing the REST progress", fmt.Sprintf(`%s.querySelector('progress').value === %d`, row, done), 15*time.Second)
	shown := eval[struct {
		Status string
		Value  int64
		Max    int64
		Text   string
	}](p, row+`&& ({Status: `+row+`.querySelector('[data-status]').dataset.status, Value: `+row+`.querySelector('progress').value,
		Max: `+row+`.querySelector('progress').max, Text: `+row+`.querySelector('progress').nextSibling.textContent})`)
	status, now := restProgress(t, key, id, "email_validation")
	t.Logf("live progress: console %s %d/%d %q; REST %s %d", shown.Status, shown.Value, shown.Max, shown.Text, status, now)
	if shown.Status != status || shown.Value != now || shown.Max != rows {
		t.Errorf("console shows %s %d/%d, REST status %s %d of %d", shown.Status, shown.Value, shown.Max, status, now, rows)
	}
	if !strings.Contains(shown.Text, fmt.Sprintf("%d of %d", now, rows)) || !strings.Contains(shown.Text, "left") {
		t.Errorf("progress text %q; want %d of %d and an estimate of the time left", shown.Text, now, rows)
	}
	p.shot("live-progress")
	open()
	p.wait("the gated list done", row+`.querySelector('[data-status="Results"]')`, 60*time.Second)
}
