// Package stackrun runs the local stack (hack/localstack) as a child
// process and talks to it as a client does: through its REST API. Benchmark
// drivers share it (hack/jobbench for lists at scale, hack/compare for a
// list against a mail world); it imports no Kubernetes package, so that
// hack/compare, a module of its own, needs none (a driver that wants the
// Kubernetes API reads Stack.Kubeconfig).
package stackrun

import (
	"bufio"
	"context"
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
	"strings"
	"syscall"
	"time"
)

// Options start a local stack.
type Options struct {
	// Bin is the localstack binary.
	Bin string
	// Root is its working directory (the repository root: the CRDs are
	// read from config/crd/bases).
	Root string
	// Args are its flags (--dir, --executor, ...).
	Args []string
	// Config, when set, is a Configuration (YAML, docs/configuration.md)
	// the stack reads over its own defaults: Start writes it beside
	// LogPath and passes --config.
	Config []byte
	// Env is its environment (nil: this process's).
	Env []string
	// LogPath receives its standard error.
	LogPath string
	// StartTimeout bounds the wait for its banner (0: 5 minutes).
	StartTimeout time.Duration
}

// Stack is a running local stack.
type Stack struct {
	Kubeconfig string
	APIURL     string
	APIKey     string
	LogPath    string

	cmd    *exec.Cmd
	exited chan error
	// http is the REST API's client, its own: a driver may have disabled
	// http.DefaultTransport (hack/compare does, so that no verifier calls
	// out).
	http *http.Client
}

// Start starts the stack and reads its banner (kubeconfig, REST API, API
// key). The stack is killed with this process (Pdeathsig): a crashed run
// must leave no stack behind.
func Start(ctx context.Context, o Options) (*Stack, error) {
	logFile, err := os.Create(o.LogPath)
	if err != nil {
		return nil, err
	}
	args := o.Args
	if o.Config != nil {
		conf := strings.TrimSuffix(o.LogPath, filepath.Ext(o.LogPath)) + ".config.yaml"
		if err := os.WriteFile(conf, o.Config, 0o600); err != nil {
			logFile.Close()
			return nil, err
		}
		args = append([]string{"--config", conf}, args...)
	}
	cmd := exec.Command(o.Bin, args...)
	cmd.Dir, cmd.Stderr, cmd.Env = o.Root, logFile, o.Env
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
	st := &Stack{cmd: cmd, exited: make(chan error, 1), LogPath: o.LogPath,
		http: &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4}}}
	banner := make(chan struct{})
	go func() {
		st.readBanner(stdout, banner)
		st.exited <- cmd.Wait()
		logFile.Close()
	}()
	timeout := o.StartTimeout
	if timeout == 0 {
		timeout = 5 * time.Minute
	}
	select {
	case <-banner:
		return st, nil
	case err := <-st.exited:
		return nil, fmt.Errorf("the local stack exited before it was up (%v):\n%s", err, st.LogTail(4000))
	case <-time.After(timeout):
		st.Kill()
		return nil, fmt.Errorf("the local stack was not up within %s:\n%s", timeout, st.LogTail(4000))
	case <-ctx.Done():
		st.Kill()
		return nil, ctx.Err()
	}
}

// readBanner reads the stack's standard output until it ends, closing
// banner once the API key (the banner's last field read) was seen.
func (st *Stack) readBanner(stdout io.Reader, banner chan struct{}) {
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		switch f := strings.Fields(sc.Text()); {
		case len(f) == 2 && f[0] == "kubeconfig:":
			st.Kubeconfig = f[1]
		case len(f) >= 3 && f[0] == "REST" && f[1] == "API:":
			st.APIURL = f[2]
		case len(f) >= 3 && f[0] == "API" && f[1] == "key:" && st.APIKey == "":
			st.APIKey = f[2]
			close(banner)
		}
	}
}

// Pid is the stack process's ID.
func (st *Stack) Pid() int { return st.cmd.Process.Pid }

// Stop interrupts the stack as Ctrl-C does and waits for it.
func (st *Stack) Stop() error {
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
		st.Kill()
		return errors.New("the local stack did not stop within 2 minutes of Ctrl-C")
	}
}

// Kill ends a stack that is still running (its control plane is stopped
// by the next run of its directory).
func (st *Stack) Kill() {
	if st.cmd.ProcessState == nil {
		_ = st.cmd.Process.Kill()
	}
}

// LogTail is the last n bytes of the stack's log.
func (st *Stack) LogTail(n int) string {
	b, _ := os.ReadFile(st.LogPath)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// Upload posts the list file at path as a client does (multipart, streamed
// from the file) with the submit parameters q (service, email_column,
// header, delimiter, name...) and returns its ID.
func (st *Stack) Upload(ctx context.Context, path string, q url.Values) (int64, error) {
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
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, st.APIURL+"/v5/list?"+q.Encode(), pr)
	if err != nil {
		return 0, err
	}
	req.Header.Set("api_key", st.APIKey)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := st.http.Do(req)
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

// Status is the list's status as GET /v5/list/{id} answers it (Pending,
// Processing, Processed, Results, Failed).
func (st *Stack) Status(ctx context.Context, id int64) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/v5/list/%d", st.APIURL, id), nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("api_key", st.APIKey)
	req.Header.Set("accept", "application/json")
	resp, err := st.http.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	var s struct {
		Status string `json:"status"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &s) != nil {
		return "", fmt.Errorf("status: %d %.500s", resp.StatusCode, body)
	}
	return s.Status, nil
}

// PollResults asks for the list's status every interval until Results (a
// Failed list is an error), or until ctx ends.
func (st *Stack) PollResults(ctx context.Context, id int64, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		switch s, err := st.Status(ctx, id); {
		case err != nil:
			return err
		case s == "Results":
			return nil
		case s == "Failed":
			return fmt.Errorf("list %d failed", id)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("list %d: %w", id, ctx.Err())
		case <-t.C:
		}
	}
}

// Download copies the list's result file to w through the REST API.
func (st *Stack) Download(ctx context.Context, id int64, w io.Writer) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/v5/list/%d/results", st.APIURL, id), nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("api_key", st.APIKey)
	resp, err := st.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<12))
		return 0, fmt.Errorf("results: %d %s", resp.StatusCode, b)
	}
	return io.Copy(w, resp.Body)
}
