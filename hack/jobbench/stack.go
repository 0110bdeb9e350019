package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/emaildata/emaildata/api/kubescheme"
	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/controllers"
	"github.com/emaildata/emaildata/internal/kits/localstack"
	"github.com/emaildata/emaildata/internal/kits/s3server"
)

// stack is a running `localstack --executor=job --store=s3`.
type stack struct {
	cmd     *exec.Cmd
	exited  chan error
	logPath string
	apiURL  string
	apiKey  string
	k8s     client.WithWatch
}

// startStack starts the local stack in dir and reads its banner.
func startStack(ctx context.Context, c config, weed, dir string, shards int) (*stack, error) {
	logPath := filepath.Join(dir, "localstack.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(filepath.Join(c.bin, "localstack"), "--dir", filepath.Join(dir, "state"),
		"--executor=job", "--store="+c.store, "--s3-port=0", "--worker-dir", c.bin,
		"--max-shards", strconv.Itoa(shards), "--shard-bytes", strconv.FormatInt(c.shardBytes, 10), "--log-format", "json",
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0",
		"--api-listen", "127.0.0.1:0", "--api-metrics-bind-address", "0")
	cmd.Dir, cmd.Stderr = c.root, logFile
	cmd.Env = os.Environ()
	if weed != "" {
		cmd.Env = append(cmd.Env, s3server.BinaryEnv+"="+weed)
	}
	// Killed with this process, as a crashed run must leave no stack.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		logFile.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	st := &stack{cmd: cmd, exited: make(chan error, 1), logPath: logPath}
	kubeconfig := make(chan string, 1)
	banner := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			switch f := strings.Fields(sc.Text()); {
			case len(f) == 2 && f[0] == "kubeconfig:":
				kubeconfig <- f[1]
			case len(f) >= 3 && f[0] == "REST" && f[1] == "API:":
				st.apiURL = f[2]
			case len(f) >= 3 && f[0] == "API" && f[1] == "key:":
				st.apiKey = f[2]
				close(banner)
			}
		}
		st.exited <- cmd.Wait()
		logFile.Close()
	}()
	select {
	case <-banner:
	case err := <-st.exited:
		return nil, fmt.Errorf("the local stack exited before it was up (%v):\n%s", err, st.logTail(4000))
	case <-time.After(5 * time.Minute):
		st.kill()
		return nil, errors.New("the local stack was not up within 5 minutes")
	case <-ctx.Done():
		st.kill()
		return nil, ctx.Err()
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", <-kubeconfig)
	if err != nil {
		st.kill()
		return nil, err
	}
	if st.k8s, err = client.NewWithWatch(cfg, client.Options{Scheme: kubescheme.New()}); err != nil {
		st.kill()
		return nil, err
	}
	return st, nil
}

func (st *stack) pid() int { return st.cmd.Process.Pid }

// stop interrupts the stack as Ctrl-C does and waits for it.
func (st *stack) stop() error {
	if err := st.cmd.Process.Signal(os.Interrupt); err != nil {
		return err
	}
	select {
	case err := <-st.exited:
		if err != nil {
			return fmt.Errorf("the local stack after Ctrl-C: %w", err)
		}
		return nil
	case <-time.After(2 * time.Minute):
		st.kill()
		return errors.New("the local stack did not stop within 2 minutes of Ctrl-C")
	}
}

// kill ends a stack that is still running (its control plane is stopped
// by the next run of its directory, which is removed anyway).
func (st *stack) kill() {
	if st.cmd.ProcessState == nil {
		_ = st.cmd.Process.Kill()
	}
}

func (st *stack) logTail(n int) string {
	b, _ := os.ReadFile(st.logPath)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// upload posts the list as a client does (multipart, streamed from the
// file) and returns its ID.
func (st *stack) upload(ctx context.Context, path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		part, err := mw.CreateFormFile("file", filepath.Base(path))
		if err == nil {
			_, err = io.Copy(part, f)
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	q := url.Values{"service": {"email_validation"}, "email_column": {"3"}, "header": {"true"},
		"delimiter": {","}, "name": {filepath.Base(path)}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, st.apiURL+"/v5/list?"+q.Encode(), pr)
	if err != nil {
		return 0, err
	}
	req.Header.Set("api_key", st.apiKey)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	var sub struct {
		ListID int64 `json:"list_id"`
	}
	if resp.StatusCode != http.StatusAccepted || json.Unmarshal(body, &sub) != nil || sub.ListID == 0 {
		return 0, fmt.Errorf("upload: %d %.500s", resp.StatusCode, body)
	}
	return sub.ListID, nil
}

type phases struct{ processing time.Time }

// waitResults watches the list until Results (or Failed, an error).
func (st *stack) waitResults(ctx context.Context, name string, timeout time.Duration) (*listsv1.EmailList, phases, error) {
	var ph phases
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	w, err := st.k8s.Watch(ctx, &listsv1.EmailListList{}, client.InNamespace(localstack.Namespace),
		client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", name)})
	if err != nil {
		return nil, ph, err
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		l, ok := ev.Object.(*listsv1.EmailList)
		if !ok {
			continue
		}
		switch l.Status.Phase {
		case listsv1.PhaseProcessing:
			if ph.processing.IsZero() {
				ph.processing = time.Now()
			}
		case listsv1.PhaseResults:
			if ph.processing.IsZero() {
				ph.processing = time.Now()
			}
			return l, ph, nil
		case listsv1.PhaseFailed:
			msg := ""
			for _, c := range l.Status.Conditions {
				msg += fmt.Sprintf("\n  %s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
			}
			return nil, ph, fmt.Errorf("%s failed:%s", name, msg)
		}
	}
	if ctx.Err() != nil {
		return nil, ph, fmt.Errorf("%s: no Results within %s", name, timeout)
	}
	return nil, ph, fmt.Errorf("%s: the watch ended", name)
}

// podStates counts the list's worker pods by how they ended.
func (st *stack) podStates(ctx context.Context, l *listsv1.EmailList) (map[string]int, error) {
	var pods corev1.PodList
	if err := st.k8s.List(ctx, &pods, client.InNamespace(localstack.Namespace),
		client.MatchingLabels{batchv1.JobNameLabel: controllers.JobName(l)}); err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, p := range pods.Items {
		for _, cs := range p.Status.ContainerStatuses {
			if t := cs.State.Terminated; t != nil {
				out[fmt.Sprintf("%s(%d)", t.Reason, t.ExitCode)]++
			}
		}
	}
	return out, nil
}

// download reads the result through the REST API, hashing it, and writes
// it to out unless out is empty.
func (st *stack) download(ctx context.Context, id int64, out string) (sum [32]byte, n int64, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/v5/list/%d/results", st.apiURL, id), nil)
	if err != nil {
		return sum, 0, err
	}
	req.Header.Set("api_key", st.apiKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return sum, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<12))
		return sum, 0, fmt.Errorf("results: %d %s", resp.StatusCode, b)
	}
	h := sha256.New()
	if out == "" {
		n, err = io.Copy(h, resp.Body)
	} else {
		n, err = copyToFile(out, io.TeeReader(resp.Body, h))
	}
	copy(sum[:], h.Sum(nil))
	return sum, n, err
}

func copyToFile(path string, r io.Reader) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	n, err := io.Copy(bw, r)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return n, err
}
