package restapi_test

import (
	"archive/zip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// browserKit is what the console's browser test needs from the machine:
// Debian's Chromium and axe-core (hack/install-browser.sh, make browser).
// Missing, the test fails under CI=true and is skipped otherwise, saying so.
func browserKit(t *testing.T) (chromium, axe string) {
	t.Helper()
	missing := func(what string) {
		msg := what + " is missing: run `make browser` (hack/install-browser.sh; installing Chromium needs root)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			chromium = p
			break
		}
	}
	if chromium == "" {
		missing("Chromium")
	}
	dir := os.Getenv("EMAILDATA_BROWSER_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "bin", "browser")
	}
	axe = filepath.Join(dir, "node_modules", "axe-core", "axe.min.js")
	if _, err := os.Stat(axe); err != nil {
		missing("axe-core (" + axe + ")")
	}
	return chromium, axe
}

// artifactsDir is where the test's screenshots go: $EMAILDATA_ARTIFACTS
// when set, else a directory kept after the test (its path is logged).
func artifactsDir(t *testing.T) string {
	t.Helper()
	base := os.Getenv("EMAILDATA_ARTIFACTS")
	var dir string
	var err error
	if base != "" {
		dir = filepath.Join(base, "console")
		err = os.MkdirAll(dir, 0o755)
	} else {
		dir, err = os.MkdirTemp("", "emaildata-console-")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("console screenshots: %s", dir)
	return dir
}

// page drives one Chromium tab.
type page struct {
	t         *testing.T
	ctx       context.Context
	shots     string
	n         int
	mu        sync.Mutex
	problems  []string // CSP refusals and script errors the page met
	urls      []string // every URL the page requested
	downloads chan string
	seen      map[string]bool // downloads reported (by the tab and the browser)
	axeSrc    string          // axe-core's source, injected by axe
	choosers  chan cdp.BackendNodeID
}

func newPage(t *testing.T, chromium string) *page {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox,
		chromedp.WindowSize(1024, 900), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	p := &page{t: t, ctx: ctx, shots: artifactsDir(t), downloads: make(chan string, 4), seen: map[string]bool{},
		choosers: make(chan cdp.BackendNodeID, 4)}
	// Listen runs on the tab's reading goroutine: record, never block.
	err := chromedp.Listen(ctx, func(ev any) {
		p.mu.Lock()
		defer p.mu.Unlock()
		switch ev := ev.(type) {
		case *log.EventEntryAdded:
			if ev.Entry.Level == log.EntryLevelError || strings.Contains(ev.Entry.Text, "Content Security Policy") {
				p.problems = append(p.problems, ev.Entry.Text+" "+ev.Entry.URL)
			}
		case *runtime.EventExceptionThrown:
			p.problems = append(p.problems, (&chromedp.ExceptionError{ExceptionDetails: ev.ExceptionDetails}).Error())
		case *network.EventRequestWillBeSent:
			p.urls = append(p.urls, ev.Request.URL)
		case *cdppage.EventFileChooserOpened: // intercepted: the file input the keyboard opened
			select {
			case p.choosers <- ev.BackendNodeID:
			default:
			}
		case *browser.EventDownloadProgress:
			if ev.State == browser.DownloadProgressStateCompleted && !p.seen[ev.GUID] {
				p.seen[ev.GUID] = true
				p.downloads <- ev.GUID
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	p.run(chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		if _, err := chromedp.Call(ctx, log.Enable, cdp.Empty{}); err != nil {
			return err
		}
		if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
			return err
		}
		events := true
		_, err := chromedp.Call(ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
			Behavior: browser.SetDownloadBehaviorBehaviorAllowAndName, DownloadPath: p.shots, EventsEnabled: &events,
		})
		return err
	}))
	return p
}

// run runs the actions, each again (up to 3 times) when the node it
// queried was replaced before it acted: chromedp resolves a selector to a
// node first, and the page may re-render in between; the query finds the
// new node the next time.
func (p *page) run(actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	for _, a := range actions {
		var err error
		for try := 0; try < 3; try++ {
			if err = chromedp.Do(p.ctx, a); err == nil || !strings.Contains(err.Error(), "Could not find node") {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			p.shot("failed")
			p.t.Fatal(err)
		}
	}
}

// shot saves a screenshot of the whole page as NN-name.png.
func (p *page) shot(name string) {
	p.n++
	png, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Logf("screenshot %s: %v", name, err)
		return
	}
	if err := os.WriteFile(filepath.Join(p.shots, fmt.Sprintf("%02d-%s.png", p.n, name)), png, 0o644); err != nil {
		p.t.Error(err)
	}
}

// eval evaluates a JavaScript expression (awaiting a promise) into out.
func eval[T any](p *page, expr string) T {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		p.shot("failed")
		p.t.Fatalf("%.200s: %v", expr, err)
	}
	return v
}

// wait polls the expression until it is true.
func (p *page) wait(what, expr string, d time.Duration) {
	p.t.Helper()
	deadline := time.Now().Add(d)
	for {
		if eval[bool](p, "!!("+expr+")") {
			return
		}
		if time.Now().After(deadline) {
			p.shot("timeout")
			p.t.Fatalf("waited %s for %s (%s)", d, what, expr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (p *page) text(sel string) string {
	p.t.Helper()
	return eval[string](p, fmt.Sprintf("document.querySelector(%q)?.textContent ?? ''", sel))
}

// axe runs axe-core on the page as it is and fails on serious or
// critical violations.
func (p *page) axe(src, when string) {
	p.t.Helper()
	if !eval[bool](p, "typeof axe === 'object'") && !eval[bool](p, src+";\ntypeof axe === 'object'") {
		p.t.Fatal("axe-core did not load")
	}
	found := eval[[]string](p, `axe.run(document, {resultTypes: ['violations']}).then(r => r.violations
		.filter(v => v.impact === 'serious' || v.impact === 'critical')
		.map(v => v.impact + ' ' + v.id + ': ' + v.help + ' at ' + v.nodes.map(n => n.target.join(' ')).join(', ')))`)
	for _, v := range found {
		p.t.Errorf("axe, %s: %s", when, v)
	}
}

// upload chooses the sample file, clicks its email column in the preview,
// picks the service and action and uploads; it returns the list ID.
func (p *page) upload(sample, service, action string) int64 {
	p.t.Helper()
	id, err := p.tryUpload(sample, service, action)
	if err != nil {
		p.t.Fatal(err)
	}
	if prog := p.text("#up-text"); !strings.Contains(prog, "sent") || !strings.Contains(prog, "/s") {
		p.t.Errorf("upload progress %q; want bytes sent and a speed", prog)
	}
	p.shot("uploaded-" + service)
	return id
}

// tryUpload is upload, with the console's message as the error when the
// upload is refused.
func (p *page) tryUpload(sample, service, action string) (int64, error) {
	p.t.Helper()
	p.run(chromedp.SetUploadFiles(chromedp.CSS("#file"), []string{sample}))
	p.wait("the preview", `!document.getElementById('preview').hidden && document.querySelector('#preview-table thead button')`, 10*time.Second)
	if info := p.text("#preview-info"); !strings.Contains(info, "commas") || !strings.Contains(info, "column names") {
		p.t.Errorf("preview says %q; want commas and a header row detected", info)
	}
	// Click another column, then the email column (4th): the choice is the click's.
	p.run(chromedp.Click(chromedp.CSS(`#preview-table [data-column="0"]`)))
	p.wait("column 1 chosen", `document.querySelector('#preview-table [data-column="0"]').getAttribute('aria-pressed') === 'true'`, 5*time.Second)
	p.run(chromedp.Click(chromedp.CSS(`#preview-table [data-column="3"]`)))
	p.wait("column 4 chosen", `document.querySelector('#preview-table [data-column="3"]').getAttribute('aria-pressed') === 'true'`, 5*time.Second)
	eval[string](p, fmt.Sprintf(`(() => { const s = document.getElementById('service'); s.value = %q; s.dispatchEvent(new Event('change')); return s.value; })()`, service))
	p.run(chromedp.Click(chromedp.CSS(fmt.Sprintf(`input[name=action][value=%s]`, action))))
	p.shot("preview-" + service)
	p.run(chromedp.Click(chromedp.CSS("#upload-btn")))
	p.wait("the upload's answer", `document.getElementById('upload-msg').textContent !== ''`, 30*time.Second)
	msg := p.text("#upload-msg")
	var id int64
	if _, err := fmt.Sscanf(msg, "Uploaded: list %d", &id); err != nil {
		return 0, errors.New(msg)
	}
	return id, nil
}

// zipOf zips the file (deflated, as list files are) into the test's
// temporary directory.
func zipOf(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), strings.TrimSuffix(filepath.Base(path), ".csv")+".zip")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	w, err := zw.Create(filepath.Base(path))
	if err == nil {
		_, err = w.Write(data)
	}
	if err == nil {
		err = zw.Close()
	}
	if err := errors.Join(err, f.Close()); err != nil {
		t.Fatal(err)
	}
	return out
}

// restStatus is GET /v5/list/{id} through the REST API.
func restStatus(t *testing.T, key string, id int64) map[string]any {
	t.Helper()
	r := do(t, newRequest(t, http.MethodGet, fmt.Sprintf("/v5/list/%d", id), key, nil, ""))
	if r.code != http.StatusOK {
		t.Fatalf("status of %d: %d %s", id, r.code, r.body)
	}
	return r.json(t)
}

// chartCounts are the numbers the console's charts show, by "field:bucket".
func (p *page) chartCounts() map[string]int64 {
	return eval[map[string]int64](p, `Object.fromEntries([...document.querySelectorAll('#detail-body g[data-key]')].map(g => [g.dataset.key, Number(g.dataset.count)]))`)
}

// download clicks the download button and returns the saved file's bytes.
func (p *page) download() []byte {
	p.t.Helper()
	p.run(chromedp.Click(chromedp.CSS("#download")))
	select {
	case guid := <-p.downloads:
		b, err := os.ReadFile(filepath.Join(p.shots, guid))
		if err != nil {
			p.t.Fatal(err)
		}
		return b
	case <-time.After(30 * time.Second):
		p.shot("no-download")
		p.t.Fatal("the download did not complete")
		return nil
	}
}

// restResults is GET /v5/list/{id}/results through the REST API.
func restResults(t *testing.T, key string, id int64) []byte {
	t.Helper()
	r := do(t, newRequest(t, http.MethodGet, fmt.Sprintf("/v5/list/%d/results", id), key, nil, ""))
	if r.code != http.StatusOK {
		t.Fatalf("results of %d: %d %s", id, r.code, r.body)
	}
	return r.body
}

// TestConsoleInBrowser drives the console in headless Chromium as a person
// would: a wrong key, sign-in, upload of the sample file with the email
// column clicked in the preview, the list's live progress, the chart's
// numbers against the REST status, a download compared byte for byte with
// the REST one, the purchase of a report list; another tenant's list is
// never listed, axe-core finds no serious or critical violation, and the
// page meets no CSP refusal or script error.
func TestConsoleInBrowser(t *testing.T) {
	chromium, axePath := browserKit(t)
	axeSrc, err := os.ReadFile(axePath)
	if err != nil {
		t.Fatal(err)
	}
	sample, err := filepath.Abs(filepath.Join("..", "..", "config", "samples", "sample-list.csv"))
	if err != nil {
		t.Fatal(err)
	}
	// Another tenant's list, there before the console signs in.
	globexID := listID(t, submit(t, keyGlobex, nil, "globex-console.csv", []byte("x@good.test\n")))

	p := newPage(t, chromium)
	p.axeSrc = string(axeSrc)
	p.run(chromedp.Navigate(baseURL + "/console/"))
	p.wait("the sign-in form", `document.getElementById('key')`, 10*time.Second)
	p.shot("signin")
	// The first page's weight as the browser received it (headers included).
	first := eval[float64](p, `performance.getEntriesByType('navigation').concat(performance.getEntriesByType('resource'))
		.reduce((n, e) => n + e.transferSize, 0)`)
	t.Logf("first page: %.0f bytes transferred", first)
	if first <= 0 || first >= 200_000 {
		t.Errorf("first page %.0f bytes transferred, want under 200 kB", first)
	}
	// The sum holds every file of the first page, each over the network.
	sent := eval[map[string]float64](p, `Object.fromEntries(performance.getEntriesByType('resource').map(e => [e.name.split('/').pop(), e.transferSize]))`)
	for _, f := range []string{"app.css", "app.js", "api.js", "preview.js", "chart.js"} {
		if sent[f] <= 0 {
			t.Errorf("the first page's %s: %v bytes transferred; want it measured (resources %v)", f, sent[f], sent)
		}
	}
	p.axe(string(axeSrc), "sign-in page")

	// A wrong key is said to be wrong, and not kept.
	p.run(chromedp.SendKeys(chromedp.CSS("#key"), "not-a-valid-key-000000000"), chromedp.Click(chromedp.CSS("#signin-form button")))
	p.wait("the wrong key's message", `document.getElementById('signin-msg').textContent !== ''`, 10*time.Second)
	if msg := p.text("#signin-msg"); !strings.Contains(msg, "not valid") {
		t.Errorf("wrong key: %q; want it said plainly", msg)
	}
	p.shot("wrong-key")

	eval[string](p, `document.getElementById('key').value = ''`)
	// By keyboard alone: the key typed, Enter submits.
	p.run(chromedp.SendKeys(chromedp.CSS("#key"), keyMulti+"\r"))
	p.wait("signed in", `!document.getElementById('app').hidden`, 10*time.Second)
	services := eval[[]string](p, `[...document.getElementById('service').options].map(o => o.value)`)
	if strings.Join(services, ",") != "email_validation,email_intelligence" {
		t.Errorf("services offered %v; want the key's list services email_validation, email_intelligence", services)
	}
	stored := eval[struct{ Session, Cookie string }](p, `({Session: sessionStorage.getItem('emaildata.apiKey'), Cookie: document.cookie})`)
	if stored.Session != keyMulti || stored.Cookie != "" {
		t.Errorf("key kept in sessionStorage %q, cookies %q; want the key in sessionStorage only", stored.Session, stored.Cookie)
	}
	p.shot("signed-in")

	// A .zip is previewed too, inflated in the browser.
	p.run(chromedp.SetUploadFiles(chromedp.CSS("#file"), []string{zipOf(t, sample)}))
	p.wait("the zip's preview", `document.getElementById('preview-info').textContent.startsWith('sample-list.zip')`, 10*time.Second)
	if info := p.text("#preview-info"); !strings.Contains(info, "commas") || !strings.Contains(info, "column names") || !strings.Contains(info, "column 4") {
		t.Errorf("zip preview says %q; want commas, a header row and the emails in column 4", info)
	}
	p.shot("preview-zip")

	// A refusal of the API is said with its reason: a callback URL into a
	// private network.
	eval[string](p, `document.getElementById('callback').value = 'http://10.0.0.1/hook'`)
	if _, err := p.tryUpload(sample, "email_validation", "process"); err == nil || !strings.Contains(err.Error(), "The server refused") {
		t.Errorf("an upload with a private callback URL: %v; want the API's refusal said", err)
	}
	p.shot("refused")
	eval[string](p, `document.getElementById('callback').value = ''`)

	// Tablet width: nothing wider than the screen.
	p.run(chromedp.EmulateViewport(768, 1024))
	if !eval[bool](p, `document.documentElement.scrollWidth <= window.innerWidth`) {
		t.Error("at 768 px the page is wider than the screen")
	}
	p.shot("tablet")
	p.run(chromedp.EmulateViewport(1024, 900))

	// Live progress, held by the test world so that it is seen.
	checkLiveProgress(t, p, keyMulti)

	// Validation list: progress, chart numbers, download.
	evID := p.upload(sample, "email_validation", "process")
	row := fmt.Sprintf(`document.querySelector('#lists-table tr[data-list-id="%d"]')`, evID)
	p.wait("the new list in the lists view", row, 15*time.Second)
	p.shot("list-listed")
	// The row as the polls update it, until the list is done: what was
	// seen is logged (a list of 10 rows may finish between two polls).
	var seen []string
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		state := eval[string](p, row+`.querySelector('[data-status]').dataset.status + ' ' + `+row+`.querySelector('progress').value + '/' + `+row+`.querySelector('progress').max`)
		if len(seen) == 0 || seen[len(seen)-1] != state {
			seen = append(seen, state)
		}
		if strings.HasPrefix(state, "Results ") {
			break
		}
		if time.Now().After(deadline) {
			p.shot("timeout")
			t.Fatalf("list %d did not finish; the row showed %v", evID, seen)
		}
	}
	t.Logf("the list's row showed: %s", strings.Join(seen, ", "))
	if last := seen[len(seen)-1]; last != "Results 10/10" {
		t.Errorf("the finished list's row shows %q, want Results 10/10", last)
	}
	p.shot("list-done")
	p.run(chromedp.Click(chromedp.CSS(fmt.Sprintf(`#lists-table tr[data-list-id="%d"] button`, evID))))
	p.wait("the result with its charts", `document.getElementById('detail-body').dataset.status === 'Results' && document.querySelector('#detail-body svg')`, 15*time.Second)
	p.shot("result-chart")
	st := restStatus(t, keyMulti, evID)
	compareChart(t, p.chartCounts(), st, "email_validation")
	p.axe(string(axeSrc), "result view")
	// The dark theme, as a system that prefers it shows it.
	p.run(chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}})
		return err
	}))
	p.shot("result-dark")
	p.axe(string(axeSrc), "result view, dark theme")
	if got, want := p.download(), restResults(t, keyMulti, evID); string(got) != string(want) {
		t.Errorf("the console's download (%d bytes) differs from the REST download (%d bytes)", len(got), len(want))
	}
	p.shot("downloaded")

	// Report list: purchase with a confirmation, then the download.
	eiID := p.upload(sample, "email_intelligence", "report")
	p.wait("the report list processed", fmt.Sprintf(`document.querySelector('#lists-table tr[data-list-id="%d"] [data-status="Processed"]')`, eiID), 60*time.Second)
	p.run(chromedp.Click(chromedp.CSS(fmt.Sprintf(`#lists-table tr[data-list-id="%d"] button`, eiID))))
	p.wait("the buy button", `document.getElementById('buy')`, 15*time.Second)
	if s := restStatus(t, keyMulti, eiID)["status"]; s != "Processed" {
		t.Fatalf("REST status before the purchase %v", s)
	}
	p.run(chromedp.Click(chromedp.CSS("#buy")))
	p.wait("the confirmation", `document.getElementById('confirm').open`, 5*time.Second)
	if txt := p.text("#confirm-text"); !strings.Contains(txt, "cannot be undone") || !strings.Contains(txt, strconv.FormatInt(eiID, 10)) {
		t.Errorf("confirmation %q; want it to say what will happen", txt)
	}
	p.shot("purchase-confirm")
	p.run(chromedp.Click(chromedp.CSS("#confirm-buy")))
	p.wait("the purchased list", `document.getElementById('download') && document.getElementById('detail-body').dataset.status === 'Results'`, 30*time.Second)
	p.shot("purchased")
	if s := restStatus(t, keyMulti, eiID)["status"]; s != "Results" {
		t.Errorf("REST status after the purchase %v", s)
	}
	if got, want := p.download(), restResults(t, keyMulti, eiID); string(got) != string(want) {
		t.Errorf("report list: the console's download (%d bytes) differs from the REST download (%d bytes)", len(got), len(want))
	}

	// Another tenant's list is never listed; the console's rows are the
	// key's own lists.
	ids := eval[[]string](p, `[...document.querySelectorAll('#lists-table tr[data-list-id]')].map(r => r.dataset.listId)`)
	for _, id := range ids {
		if id == strconv.FormatInt(globexID, 10) {
			t.Errorf("globex's list %d is listed for acme", globexID)
		}
	}
	if len(ids) < 2 {
		t.Errorf("lists shown %v; want at least the two uploaded", ids)
	}

	// Email append: the console's match rates against the REST status.
	checkMatchRates(t, p)

	p.mu.Lock()
	defer p.mu.Unlock()
	for _, u := range p.urls {
		if strings.Contains(u, keyMulti) || strings.Contains(u, keyAppend) || !strings.HasPrefix(u, baseURL) && !strings.HasPrefix(u, "blob:") && !strings.HasPrefix(u, "data:") {
			t.Errorf("the page requested %q: a key in a URL or another origin", u)
		}
	}
	for _, pr := range p.problems {
		// The browser logs the API's answers 400 and 401 to the refusals the
		// test provokes (the wrong key, the private callback URL).
		if !regexp.MustCompile(`status of 40[01] `).MatchString(pr) {
			t.Errorf("the page met: %s", pr)
		}
	}
}

// compareChart: every bucket of the REST status's status and status_code
// reporting is charted with the same number, and nothing else is.
func compareChart(t *testing.T, chart map[string]int64, st map[string]any, service string) {
	t.Helper()
	svc, _ := st["services"].(map[string]any)[service].(map[string]any)
	rep, _ := svc["reporting"].(map[string]any)
	want := map[string]int64{}
	for _, field := range []string{"status", "status_code"} {
		m, _ := rep[field].(map[string]any)
		for k, v := range m {
			want[field+":"+k] = int64(v.(float64))
		}
	}
	if len(want) == 0 {
		t.Fatalf("the REST status has no reporting to compare: %v", st)
	}
	got, _ := json.Marshal(chart)
	exp, _ := json.Marshal(want)
	if string(got) != string(exp) {
		t.Errorf("chart %s, REST status %s", got, exp)
	}
}
