package localstack_test

import (
	"archive/zip"
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/emaildata/emaildata/internal/kits/sdkcontract"
	"github.com/emaildata/emaildata/internal/refdata/people"
)

// TestMakeRunE2E does what a new user does: start the local stack (the
// program behind `make run`), `kubectl apply -f config/samples/`, watch the
// list reach Results, find its result file in the store, then Ctrl-C.
func TestMakeRunE2E(t *testing.T) {
	// Its own state directory, free ports and process group: it runs
	// beside the other e2e tests (go test -parallel, GOMAXPROCS by default).
	t.Parallel()
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set; run the tests with `make test`")
	}
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		kubectl = filepath.Join(assets, "kubectl")
	}
	bin, root := buildLocalstack(t)

	dir := t.TempDir()
	cmd := exec.Command(bin, "--dir", dir, "--metrics-bind-address", freeAddr(t), "--health-probe-bind-address", "0", "--api-listen", "127.0.0.1:0",
		"--api-metrics-bind-address", "127.0.0.1:0")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "KUBEBUILDER_ASSETS="+assets)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncWriter{b: &strings.Builder{}}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exited <- cmd.Wait()
	}()
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	}()

	// The banner prints the kubeconfig and the apply line.
	var kubeconfig, applyLine, apiURL, apiKey, validationKey, callbacks, history string
	var mm metricsBanner
	deadline := time.After(90 * time.Second)
	for applyLine == "" || !mm.complete() {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("localstack exited early; logs:\n%s", logs.String())
			}
			f := strings.Fields(l)
			switch {
			case len(f) == 2 && f[0] == "kubeconfig:":
				kubeconfig = f[1]
			case len(f) >= 3 && f[0] == "REST" && f[1] == "API:":
				apiURL = f[2]
			case len(f) >= 3 && f[0] == "API" && f[1] == "key:":
				apiKey = f[2]
			case len(f) >= 3 && f[0] == "Validation" && f[1] == "key:":
				validationKey = f[2]
			case len(f) >= 3 && f[0] == "callbacks:":
				callbacks = strings.Join(f[1:], " ")
			case len(f) >= 3 && f[0] == "history:":
				history = strings.Join(f[1:], " ")
			}
			mm.parse(f)
			if strings.Contains(l, "kubectl apply -f") {
				applyLine = strings.TrimSpace(l)
			}
		case <-deadline:
			t.Fatalf("no banner within 90s; logs:\n%s", logs.String())
		}
	}
	if kubeconfig == "" || apiURL == "" || apiKey == "" {
		t.Fatalf("banner lacks kubeconfig (%q), REST API (%q) or API key (%q)", kubeconfig, apiURL, apiKey)
	}
	// make run says where the history is and that its key is a local one,
	// kept (owner-only) in the state directory.
	keyFile := filepath.Join(dir, "history-key")
	if fi, err := os.Stat(keyFile); err != nil || fi.Mode().Perm() != 0o600 ||
		!strings.Contains(history, "bolt://"+filepath.Join(dir, "history.db")) || !strings.Contains(history, "local key in "+keyFile) {
		t.Errorf("history banner %q, key file %v: want the bolt file and the local key in %s (0600)", history, err, keyFile)
	}
	go func() {
		for range lines {
		}
	}()

	run := func(args ...string) string {
		t.Helper()
		c := exec.Command(kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...)
		c.Dir = root
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	// Exactly the printed command.
	out := run(strings.Fields(strings.TrimPrefix(applyLine, "kubectl "))...)
	if !strings.Contains(out, "emaillist.lists.emaildata.io/sample-list created") {
		t.Fatalf("apply output:\n%s", out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		phase := run("get", "emaillist", "sample-list", "-o", "jsonpath={.status.phase}")
		if phase == "Results" {
			break
		}
		if phase == "Failed" {
			t.Fatalf("sample list failed:\n%s", run("get", "emaillist", "sample-list", "-o", "yaml"))
		}
		select {
		case <-ctx.Done():
			t.Fatalf("sample list did not reach Results (phase %q); logs:\n%s", phase, logs.String())
		case <-time.After(300 * time.Millisecond):
		}
	}

	table := run("get", "emaillists")
	header := strings.Fields(strings.SplitN(table, "\n", 2)[0])
	if strings.Join(header, " ") != "NAME LISTID SERVICE ACTION PHASE PROGRESS AGE" {
		t.Errorf("kubectl get emaillists columns: %v", header)
	}
	if !strings.Contains(table, "email_validation") || !strings.Contains(table, "Results") {
		t.Errorf("kubectl get emaillists:\n%s", table)
	}
	// -o wide adds the Ready condition's reason and message.
	wide := run("get", "emaillists", "-o", "wide")
	if h := strings.Fields(strings.SplitN(wide, "\n", 2)[0]); strings.Join(h, " ") != "NAME LISTID SERVICE ACTION PHASE PROGRESS AGE REASON MESSAGE" {
		t.Errorf("kubectl get emaillists -o wide columns: %v", h)
	}
	if !strings.Contains(wide, "results are ready to download") {
		t.Errorf("kubectl get emaillists -o wide lacks the Ready message:\n%s", wide)
	}
	if short := run("get", "el"); !strings.Contains(short, "sample-list") {
		t.Errorf("short name el does not work:\n%s", short)
	}

	key := run("get", "emaillist", "sample-list", "-o", "jsonpath={.status.result.key}")
	data, err := os.ReadFile(filepath.Join(dir, "store", key))
	if err != nil {
		t.Fatalf("result file not in the store: %v", err)
	}
	rows := strings.Split(strings.TrimSpace(string(data)), "\n")
	if !strings.HasSuffix(rows[0], "ev_status,ev_status_code,ev_domain_type,ev_role_account,ev_correction,ev_duplicate,ev_valid,ev_from_history") || len(rows) < 3 {
		t.Errorf("result file:\n%s", data)
	}

	// Applying again, with kustomize this time, changes nothing.
	if out := run("apply", "-k", "config/samples/"); !strings.Contains(out, "unchanged") {
		t.Errorf("apply -k output:\n%s", out)
	}

	// The README's and the guide's REST examples work as written against the
	// printed API and key.
	runREADMEBlock(t, root, apiURL, apiKey)
	runGuideRESTBlock(t, root, apiURL, apiKey)
	runDemographicsList(t, apiURL, apiKey)
	runSDKCalls(t, apiURL, apiKey)
	runLocalKeysAndCallbacks(t, apiURL, apiKey, validationKey, callbacks)
	runZipLimits(t, apiURL, apiKey)
	// The lists and calls above moved the manager's and the API's metrics.
	checkMetrics(t, mm, apiURL, apiKey)

	// Ctrl-C stops everything cleanly.
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("localstack exit: %v; logs:\n%s", err, logs.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("localstack did not stop within 60s of Ctrl-C")
	}
}

// runZipLimits: make run's API checks a zip against the limits its manager
// prepares it with, so a zip declaring 3 GiB (more than the manager's
// 2 GiB) is refused at once, 400 BadZip, rather than accepted (202) and
// failed later, as when the API allowed 10 GiB.
func runZipLimits(t *testing.T, apiURL, apiKey string) {
	t.Helper()
	var z bytes.Buffer
	zw := zip.NewWriter(&z)
	w, _ := zw.Create("big.csv")
	_, _ = io.WriteString(w, "email\na@example.com\n")
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	b := z.Bytes()
	i := bytes.LastIndex(b, []byte("PK\x01\x02"))
	binary.LittleEndian.PutUint32(b[i+24:], 3<<30) // the size the central header declares
	req, err := http.NewRequest(http.MethodPost, apiURL+"/v5/list?service=email_validation&name=big.zip&header=true", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("api_key", apiKey)
	req.Header.Set("Content-Type", "application/zip")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `"BadZip"`) {
		t.Errorf("a zip declaring 3 GiB: %d %s, want 400 BadZip", resp.StatusCode, body)
	}
}

// syncWriter collects the child's logs while the test reads them.
type syncWriter struct {
	mu sync.Mutex
	b  *strings.Builder
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// gettingStarted is the page whose e2e-tagged blocks the end-to-end tests
// run as written (the README's own "Try it" block is run too).
const gettingStarted = "docs/getting-started.md"

// runTaggedBlock runs the sh block of file tagged <!-- e2e:tag --> as a user
// would paste it, with API and KEY exported as make run tells them to be,
// in a fresh directory holding config/; it returns the output and the
// directory.
func runTaggedBlock(t *testing.T, root, file, tag, apiURL, apiKey string) (string, string) {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(root, file))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(doc), "<!-- e2e:"+tag+" -->\n```sh\n")
	if !ok {
		t.Fatalf("%s has no e2e:%s block", file, tag)
	}
	script, _, _ := strings.Cut(after, "```")
	work := t.TempDir()
	if err := os.Symlink(filepath.Join(root, "config"), filepath.Join(work, "config")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "API="+apiURL, "KEY="+apiKey)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s's e2e:%s block failed: %v\n%s", file, tag, err, out)
	}
	return string(out), work
}

// runREADMEBlock runs the README's "Try it" REST block: a list submitted,
// waited for, downloaded, and one address verified.
func runREADMEBlock(t *testing.T, root, apiURL, apiKey string) {
	t.Helper()
	text, work := runTaggedBlock(t, root, "README.md", "readme-rest", apiURL, apiKey)
	if !strings.Contains(text, `{"safe_to_send":{`) {
		t.Errorf("README block output lacks the /v5/ev answer:\n%s", text)
	}
	if files, _ := filepath.Glob(filepath.Join(work, "people-*-results.csv")); len(files) != 1 {
		t.Errorf("the README block saved %v, want one people-<id>-results.csv", files)
	}
}

// runGuideRESTBlock runs the getting-started page's REST API curl block, as
// a user would paste it, and checks what it produced.
func runGuideRESTBlock(t *testing.T, root, apiURL, apiKey string) {
	t.Helper()
	text, work := runTaggedBlock(t, root, gettingStarted, "rest-api", apiURL, apiKey)
	for _, want := range []string{`"list_id":`, `"status":"Results"`, `"email_validation":{`, `"error":"NotPurchasable"`,
		`"age":"65+","gender":"Male"`, `"match_level":"Individual"`, `{"age":"65+","life_stage_group":"Retirees","rfm_last_order":"2024-10-21"}`,
		`{"postal_address":{"first_name":"Joseph","last_name":"Lee","address":"9415 Chestnut Ct","city":"Pittsburgh","state":"PA","zip":"15231"}}`,
		`{"email_append":[{"email":"josephl@example.org","email_match_type":"Individual"}]}`,
		`{"alternate_email":[{"email":"alee@example.org","email_match_type":"Household"},`,
		`{"phone_verification":{"phone_number":"16502530000","line_type":"landline_or_mobile","status":"valid","country_code":"US","country_calling_code":1}}`,
		`{"total_records":1,"skipped_records":0,"feedback_id":"fb_`, `"code":"email_reported"`,
		`{"reports":[{"feedback_id":"fb_`, `"reference_id":"case-17"`, `{"withdrawn":1}`} {
		if !strings.Contains(text, want) {
			t.Errorf(gettingStarted+" block output lacks %s:\n%s", want, text)
		}
	}
	files, _ := filepath.Glob(filepath.Join(work, "people-*-results.csv"))
	if len(files) != 1 {
		t.Fatalf("curl -OJ saved %v, want one people-<id>-results.csv", files)
	}
	data, _ := os.ReadFile(files[0])
	if !strings.HasPrefix(string(data), "id,first_name,last_name,email,ev_status") {
		t.Errorf("downloaded result:\n%s", data)
	}
}

// runSDKCalls makes every call of the official SDKs (internal/kits/sdkcontract)
// against the local stack, about people it loaded: each must work.
func runSDKCalls(t *testing.T, apiURL, apiKey string) {
	t.Helper()
	a, b, ok := sdkcontract.Pick(people.GenerateSlice(1, 20_000)) // the local stack's people
	if !ok {
		t.Fatal("no two people the SDK calls can name")
	}
	client := &http.Client{Timeout: 30 * time.Second}
	for _, c := range sdkcontract.Calls(sdkcontract.Params{Key: apiKey, Person: a, Other: b, Typo: "john@gmial.com"}) {
		resp, body, err := c.Do(context.Background(), client, apiURL)
		if err != nil {
			t.Errorf("%s %s: %v", c.SDK, c.Method, err)
			continue
		}
		if err := c.Check(resp.StatusCode, resp.Header, body); err != nil {
			t.Errorf("%s %s against make run: %v", c.SDK, c.Method, err)
		}
	}
}

// runDemographicsList submits an email_intelligence report list of people
// the local stack loaded, checks the reporting, purchases it and downloads
// the appended demographics: the two-step flow with a real service.
func runDemographicsList(t *testing.T, apiURL, apiKey string) {
	t.Helper()
	var csv strings.Builder
	csv.WriteString("email\n")
	for _, p := range people.GenerateSlice(1, 30) {
		csv.WriteString(p.Email + "\n")
	}
	csv.WriteString("nobody@nowhere.example\n")
	call := func(method, path, ct string, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, apiURL+path, strings.NewReader(body))
		req.Header.Set("api_key", apiKey)
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := call("POST", "/v5/list?service=email_intelligence&action=report&header=true&delimiter=%2C&name=people.csv", "text/csv", csv.String())
	if code != http.StatusAccepted {
		t.Fatalf("submit: %d %s", code, body)
	}
	var sub struct {
		ListID int64 `json:"list_id"`
	}
	_ = json.Unmarshal([]byte(body), &sub)
	var st struct {
		Status    string                      `json:"status"`
		Reporting map[string]map[string]int64 `json:"reporting"`
	}
	deadline := time.Now().Add(30 * time.Second)
	for st.Status != "Processed" {
		if time.Now().After(deadline) {
			t.Fatalf("report list did not reach Processed: %+v", st)
		}
		time.Sleep(200 * time.Millisecond)
		_, body = call("GET", fmt.Sprintf("/v5/list/%d", sub.ListID), "", "")
		_ = json.Unmarshal([]byte(body), &st)
		if st.Status == "Failed" {
			t.Fatalf("report list failed: %s", body)
		}
	}
	if st.Reporting["age"]["Total Count"] != 30 {
		t.Errorf("reporting %v: want 30 people matched with an age", st.Reporting)
	}
	if code, body = call("POST", fmt.Sprintf("/v5/list/%d/purchase", sub.ListID), "application/json", ""); code != http.StatusOK {
		t.Fatalf("purchase: %d %s", code, body)
	}
	code, body = call("GET", fmt.Sprintf("/v5/list/%d/results", sub.ListID), "", "")
	if code != http.StatusOK || !strings.HasPrefix(body, "email,age,gender,") {
		t.Fatalf("results: %d %.300s", code, body)
	}
	if got := strings.Count(body, "\n"); got != 32 {
		t.Errorf("%d lines, want header + 31 rows", got)
	}
}

// runLocalKeysAndCallbacks: the banner's validation key submits a list
// without service= (the all-services key must name one), and a callback
// reaches a receiver on this machine, as the banner says it may, signed
// with the key GET /v5/callback/secret gives the tenant (the Standard
// Webhooks reference library verifies it).
func runLocalKeysAndCallbacks(t *testing.T, apiURL, apiKey, validationKey, callbacks string) {
	t.Helper()
	if validationKey == "" || validationKey == apiKey {
		t.Fatalf("banner validation key %q (all-services key %q)", validationKey, apiKey)
	}
	if !strings.Contains(callbacks, "127.0.0.0/8") {
		t.Errorf("banner callbacks line %q does not say loopback is allowed", callbacks)
	}
	type delivery struct {
		m    map[string]any
		body []byte
		h    http.Header
	}
	got := make(chan delivery, 4)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		got <- delivery{m, b, r.Header.Clone()}
	}))
	defer recv.Close()
	submit := func(key, query string) (int, string) {
		req, _ := http.NewRequest("POST", apiURL+"/v5/list?"+query, strings.NewReader("a@example.com\nb@example.org\n"))
		req.Header.Set("api_key", key)
		req.Header.Set("Content-Type", "text/csv")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := submit(apiKey, "name=x.txt"); code != http.StatusBadRequest || !strings.Contains(body, "several list services") {
		t.Errorf("all-services key without service=: %d %s", code, body)
	}
	code, body := submit(validationKey, "name=cb.txt&callback_url="+url.QueryEscape(recv.URL+"/done"))
	if code != http.StatusAccepted {
		t.Fatalf("validation key without service=, with a loopback callback: %d %s", code, body)
	}
	var sub struct {
		ListID float64 `json:"list_id"`
	}
	_ = json.Unmarshal([]byte(body), &sub)
	select {
	case d := <-got:
		if d.m["list_id"] != sub.ListID || d.m["status"] != "Results" {
			t.Errorf("callback %v, want list %v in Results", d.m, sub.ListID)
		}
		checkSigned(t, apiURL, validationKey, d.body, d.h)
	case <-time.After(60 * time.Second):
		t.Error("no callback to the loopback receiver within 60s")
	}
}

// checkSigned: the callback verifies under the tenant's key from the API.
func checkSigned(t *testing.T, apiURL, key string, body []byte, h http.Header) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, apiURL+"/v5/callback/secret", nil)
	req.Header.Set("api_key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s struct {
		Secret string `json:"secret"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v5/callback/secret: %d %v", resp.StatusCode, err)
	}
	wh, err := standardwebhooks.NewWebhook(s.Secret)
	if err != nil {
		t.Fatal(err)
	}
	if err := wh.Verify(body, h); err != nil {
		t.Errorf("the callback does not verify with the tenant's key: %v", err)
	}
}
