package localstack_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/emaildata/emaildata/api/kubescheme"
	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/controllers"
	"github.com/emaildata/emaildata/internal/kits/localstack"
	"github.com/emaildata/emaildata/internal/kits/s3server"
	"github.com/emaildata/emaildata/internal/lists/blobstore"
)

// TestMakeRunS3Jobs is `make run ARGS="--executor=job --store=s3"`: the
// operator's store on a real S3-compatible server (SeaweedFS), lists run as
// Jobs whose worker pods reach the store with the credentials of the
// Secret. Through the REST API a list of 18 MB (an upload and a result
// larger than the AWS SDK's default 16 MiB multipart threshold) goes through the
// whole flow: upload, prepare, three shards, merge, download; deleting it
// deletes its objects. With the Secret's key made wrong, the next list's
// workers are refused by the server while the manager, which has its own
// copy of the credentials, still prepares it: the workers use the Secret.
func TestMakeRunS3Jobs(t *testing.T) {
	// Side by side with the other stacks: the test's own store client gets
	// the Secret's key pair as arguments, never through the environment,
	// which the other tests' processes inherit.
	t.Parallel()
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set; run the tests with `make test`")
	}
	weed := s3server.BinaryForTest(t)
	bin, root := buildBinaries(t)
	st := startS3Stack(t, bin, root, weed)
	k8s := kubeClient(t, st.kubeconfig)
	ctx := context.Background()

	// The test reads the bucket with the key pair of the Secret.
	var sec corev1.Secret
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: localstack.Namespace, Name: localstack.StoreSecret}, &sec); err != nil {
		t.Fatal(err)
	}
	store := openStore(ctx, t, st.blobURL, sec.Data)
	defer store.Close()

	const rows = 200_000
	var csv strings.Builder
	csv.WriteString("id,email,notes\n")
	for i := 0; i < rows; i++ {
		fmt.Fprintf(&csv, "%d,user%d@example.com,%s\n", i, i, strings.Repeat("n", 60))
	}
	id := st.submit(t, csv.String())
	st.waitStatus(t, id, "Results", 4*time.Minute)
	res, err := st.get(fmt.Sprintf("/v5/list/%d/results", id))
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(res, "\n"); lines != rows+1 || !strings.Contains(res, "user199999@example.com") {
		t.Fatalf("downloaded %d lines (%d bytes), want the header and %d rows", lines, len(res), rows)
	}

	l := listByID(t, k8s, id)
	if l.Status.Shards < 2 {
		t.Errorf("%d shards, want several Job indexes", l.Status.Shards)
	}
	for _, key := range []string{l.Spec.Source.UploadKey, l.Status.Result.Key} {
		a, err := store.Attributes(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		// S3 gives a multipart object the ETag "<md5 of the parts' md5s>-<parts>".
		if a.Size <= 16<<20 || !strings.Contains(a.ETag, "-") {
			t.Errorf("%s: %d bytes, ETag %s: want a multipart object over 16 MiB", key, a.Size, a.ETag)
		}
	}
	if a, _ := store.Attributes(ctx, l.Status.Result.Key); a != nil && a.Size != int64(len(res)) {
		t.Errorf("result object %d bytes, downloaded %d", a.Size, len(res))
	}
	pods := jobPods(t, k8s, l)
	if len(pods) != int(l.Status.Shards) {
		t.Errorf("%d worker pods for %d shards", len(pods), l.Status.Shards)
	}
	for _, p := range pods {
		c := p.Spec.Containers[0]
		if len(c.EnvFrom) != 1 || c.EnvFrom[0].SecretRef == nil || c.EnvFrom[0].SecretRef.Name != localstack.StoreSecret || p.Status.Phase != corev1.PodSucceeded {
			t.Errorf("pod %s: phase %s envFrom %+v; want it to have succeeded with the store's Secret", p.Name, p.Status.Phase, c.EnvFrom)
		}
	}

	// Delete the list: its objects and its upload leave the bucket.
	prefix := blobstore.ListKeys{UID: string(l.UID)}.Prefix()
	if n := countObjects(t, store, prefix); n == 0 {
		t.Fatalf("no objects under %s before the delete", prefix)
	}
	if err := k8s.Delete(ctx, l); err != nil {
		t.Fatal(err)
	}
	waitGone(t, k8s, l)
	if n := countObjects(t, store, prefix); n != 0 {
		t.Errorf("%d objects left under %s", n, prefix)
	}
	if ok, err := store.Exists(ctx, l.Spec.Source.UploadKey); ok || err != nil {
		t.Errorf("upload %s still there (%v)", l.Spec.Source.UploadKey, err)
	}

	// A wrong key in the Secret: the workers are refused.
	sec.Data["AWS_SECRET_ACCESS_KEY"] = []byte("not-the-key")
	if err := k8s.Update(ctx, &sec); err != nil {
		t.Fatal(err)
	}
	id = st.submit(t, "email\na@example.com\nb@example.org\n")
	st.waitStatus(t, id, "Failed", 2*time.Minute)
	l = listByID(t, k8s, id)
	if l.Status.Shards < 1 {
		t.Fatalf("the list was never prepared (%d shards): the manager should still reach the store", l.Status.Shards)
	}
	pods = jobPods(t, k8s, l)
	refused := false
	for _, p := range pods {
		for _, cs := range p.Status.ContainerStatuses {
			if term := cs.State.Terminated; term != nil && term.ExitCode != 0 && strings.Contains(term.Message, "SignatureDoesNotMatch") {
				refused = true
			}
		}
	}
	if !refused {
		t.Errorf("no worker pod was refused by the store with the Secret's wrong key: %s", describePods(pods))
	}
	st.interruptAndWait(t)
}

type s3Stack struct {
	cmd                                 *exec.Cmd
	logs                                *syncWriter
	exited                              chan error
	kubeconfig, blobURL, apiURL, apiKey string
}

// startS3Stack starts the local stack on an s3 store, without credentials
// of its own in the environment, and reads its banner.
func startS3Stack(t *testing.T, bin, root, weed string) *s3Stack {
	t.Helper()
	cmd := exec.Command(filepath.Join(bin, "localstack"), "--dir", t.TempDir(), "--executor=job", "--store=s3", "--s3-port=0",
		"--worker-dir", bin, "--metrics-bind-address", "0", "--health-probe-bind-address", "0",
		"--api-listen", "127.0.0.1:0", "--api-metrics-bind-address", "0")
	cmd.Dir = root
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, s3server.BinaryEnv+"="+weed)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	st := &s3Stack{cmd: cmd, logs: &syncWriter{b: &strings.Builder{}}, exited: make(chan error, 1)}
	cmd.Stderr = st.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
		if t.Failed() {
			t.Logf("localstack logs:\n%s", tailOf(st.logs.String(), 6000))
		}
	})
	banner := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			switch {
			case len(f) == 2 && f[0] == "kubeconfig:":
				st.kubeconfig = f[1]
			case len(f) == 3 && f[0] == "blob" && f[1] == "store:":
				st.blobURL = f[2]
			case len(f) >= 2 && f[0] == "REST" && f[1] == "API:":
				st.apiURL = f[2]
			case len(f) >= 3 && f[0] == "API" && f[1] == "key:":
				st.apiKey = f[2]
				close(banner)
			}
		}
		st.exited <- cmd.Wait()
	}()
	select {
	case <-banner:
	case err := <-st.exited:
		t.Fatalf("localstack exited before it was up: %v; logs:\n%s", err, tailOf(st.logs.String(), 6000))
	case <-time.After(3 * time.Minute):
		t.Fatalf("localstack not up within 3m")
	}
	if !strings.HasPrefix(st.blobURL, "s3://"+localstack.StoreBucket+"?") || st.kubeconfig == "" || st.apiURL == "" {
		t.Fatalf("banner: blob store %q kubeconfig %q API %q", st.blobURL, st.kubeconfig, st.apiURL)
	}
	return st
}

func (st *s3Stack) call(method, path, body string) (int, string, error) {
	req, err := http.NewRequest(method, st.apiURL+path, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("api_key", st.apiKey)
	if body != "" {
		req.Header.Set("Content-Type", "text/csv")
	}
	resp, err := (&http.Client{Timeout: 2 * time.Minute}).Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func (st *s3Stack) get(path string) (string, error) {
	code, body, err := st.call("GET", path, "")
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("GET %s: %d %.300s", path, code, body)
	}
	return body, err
}

func (st *s3Stack) submit(t *testing.T, csv string) int64 {
	t.Helper()
	code, body, err := st.call("POST", "/v5/list?service=email_validation&header=true&delimiter=%2C&name=list.csv", csv)
	if err != nil || code != http.StatusAccepted {
		t.Fatalf("submit: %d %.300s %v", code, body, err)
	}
	var sub struct {
		ListID int64 `json:"list_id"`
	}
	if err := json.Unmarshal([]byte(body), &sub); err != nil || sub.ListID == 0 {
		t.Fatalf("submit answered %s", body)
	}
	return sub.ListID
}

func (st *s3Stack) waitStatus(t *testing.T, id int64, want string, within time.Duration) {
	t.Helper()
	var s struct {
		Status string `json:"status"`
	}
	var body string
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		var err error
		if body, err = st.get(fmt.Sprintf("/v5/list/%d", id)); err != nil {
			t.Fatal(err)
		}
		_ = json.Unmarshal([]byte(body), &s)
		if s.Status == want {
			return
		}
		if s.Status == "Failed" || s.Status == "Results" {
			break
		}
	}
	t.Fatalf("list %d: %.500s; want status %s", id, body, want)
}

func (st *s3Stack) interruptAndWait(t *testing.T) {
	t.Helper()
	if err := st.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-st.exited:
		if err != nil {
			t.Errorf("exit after Ctrl-C: %v", err)
		}
	case <-time.After(90 * time.Second):
		t.Errorf("localstack did not stop within 90s of Ctrl-C")
	}
}

func kubeClient(t *testing.T, kubeconfig string) client.Client {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: kubescheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func listByID(t *testing.T, k8s client.Client, id int64) *listsv1.EmailList {
	t.Helper()
	var l listsv1.EmailList
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: localstack.Namespace, Name: fmt.Sprintf("list-%d", id)}, &l); err != nil {
		t.Fatal(err)
	}
	return &l
}

// jobPods lists the worker pods of the list's Job.
func jobPods(t *testing.T, k8s client.Client, l *listsv1.EmailList) []corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	if err := k8s.List(context.Background(), &pods, client.InNamespace(localstack.Namespace),
		client.MatchingLabels{batchv1.JobNameLabel: controllers.JobName(l)}); err != nil {
		t.Fatal(err)
	}
	return pods.Items
}

func describePods(pods []corev1.Pod) string {
	var b strings.Builder
	for _, p := range pods {
		fmt.Fprintf(&b, "\n%s %s", p.Name, p.Status.Phase)
		for _, cs := range p.Status.ContainerStatuses {
			if term := cs.State.Terminated; term != nil {
				fmt.Fprintf(&b, " exit %d %s: %.400s", term.ExitCode, term.Reason, term.Message)
			}
		}
	}
	return b.String()
}

func waitGone(t *testing.T, k8s client.Client, l *listsv1.EmailList) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(l), &listsv1.EmailList{}); apierrors.IsNotFound(err) {
			return
		}
	}
	t.Fatalf("list %s still there 2m after its delete", l.Name)
}

// openStore opens the stack's bucket (blobURL, as its banner gives it)
// with the key pair of the store's Secret.
func openStore(ctx context.Context, t *testing.T, blobURL string, secret map[string][]byte) *blobstore.Store {
	t.Helper()
	creds, err := blobstore.CredentialsFromSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(blobURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	b, err := blobstore.OpenExternal(ctx, blobstore.ExternalURL{Bucket: u.Host, Region: q.Get("region"), Endpoint: q.Get("endpoint"), PathStyle: true},
		creds, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	return blobstore.FromBucket(b, blobURL)
}

func countObjects(t *testing.T, store *blobstore.Store, prefix string) int {
	t.Helper()
	n, err := store.Count(context.Background(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func tailOf(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
