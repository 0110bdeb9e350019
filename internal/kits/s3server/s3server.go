// Package s3server is test and local-development infrastructure, not
// product code: it runs a real S3-compatible server, SeaweedFS (`weed
// mini`, built from the Go module proxy by hack/s3-server.sh), on 127.0.0.1,
// with the identities (key pairs, and the buckets each may use) and the
// buckets a test or `make run ARGS=--store=s3` needs. The operator's store
// then runs on it through its ordinary s3:// URL.
package s3server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// BinaryEnv names the weed binary; `make test` and `make run` set it from
// hack/s3-server.sh.
const BinaryEnv = "EMAILDATA_S3_SERVER"

// Region is the region every client of the server names (SeaweedFS accepts
// any; the AWS SDK needs one).
const Region = "us-east-1"

// Identity is a key pair and what it may do: everything on Buckets, or on
// every bucket (and create buckets) when Buckets is empty.
type Identity struct {
	Name, AccessKey, SecretKey string
	Buckets                    []string
}

// Options configure a server.
type Options struct {
	// Binary is the weed executable (default: Binary()).
	Binary string
	// Dir holds the data, the identities file and weed.log.
	Dir string
	// Identities may use the server; the first must have no Buckets (it
	// creates the buckets).
	Identities []Identity
	// Buckets are created when missing.
	Buckets []string
	// Port of the S3 API (default: a free one).
	Port int
	// StopGrace is how long Stop waits after SIGTERM before SIGKILL
	// (default 10s; tests, whose data is thrown away, use less).
	StopGrace time.Duration
}

// Server is a running weed.
type Server struct {
	// Endpoint is the S3 API's base URL, http://127.0.0.1:<port>.
	Endpoint string
	// Log is the server's log file.
	Log string

	cmd    *exec.Cmd
	exited chan struct{}
	ports  []int
	grace  time.Duration
}

// Start runs the server and waits until it serves the buckets.
func Start(ctx context.Context, o Options) (*Server, error) {
	if len(o.Identities) == 0 || len(o.Identities[0].Buckets) != 0 {
		return nil, errors.New("s3server: the first identity must be an administrator (no Buckets)")
	}
	if o.Binary == "" {
		var err error
		if o.Binary, err = Binary(); err != nil {
			return nil, err
		}
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return nil, err
	}
	config := filepath.Join(dir, "identities.json")
	if err := writeIdentities(config, o.Identities); err != nil {
		return nil, err
	}
	if o.StopGrace <= 0 {
		o.StopGrace = 10 * time.Second
	}
	for attempt := 1; ; attempt++ {
		s, err := start(ctx, o, dir, config)
		if err == nil {
			return s, nil
		}
		if attempt < portAttempts && errors.Is(err, errExited) && s.lostPort() {
			continue // another process took a port between freePorts and weed's bind
		}
		if s.Log == "" { // no weed started
			return nil, err
		}
		return nil, fmt.Errorf("%w (log: %s)", err, s.Log)
	}
}

// portAttempts bounds the starts with fresh ports: weed binds the ports
// freePorts found free only when it starts, and on a machine running
// tests side by side another process may take one in between.
const portAttempts = 3

// errExited: weed exited before it served.
var errExited = errors.New("s3server: weed exited while starting")

// start is one attempt of Start, on fresh ports; on an error the server
// is stopped, and the returned one tells only its log.
func start(ctx context.Context, o Options, dir, config string) (*Server, error) {
	ports, err := freePorts(11, o.Port)
	if err != nil {
		return &Server{}, err
	}
	s := &Server{Endpoint: "http://127.0.0.1:" + strconv.Itoa(ports[6]), Log: filepath.Join(dir, "weed.log"), ports: ports, grace: o.StopGrace}
	if err := s.run(o.Binary, dir, config); err != nil {
		return s, err
	}
	if err := s.createBuckets(ctx, o.Identities[0], o.Buckets); err != nil {
		_ = s.Stop()
		return s, err
	}
	return s, nil
}

// lostPort reports whether weed's log says one of its ports was taken.
func (s *Server) lostPort() bool {
	b, err := os.ReadFile(s.Log)
	return err == nil && bytes.Contains(b, []byte("address already in use"))
}

// run starts `weed mini`, SeaweedFS's single-process mode (master, volume
// server, filer, S3 gateway and its admin server): every port on
// 127.0.0.1, WebDAV, the admin UI, the Iceberg and Lance listeners and
// telemetry off. (`weed server -s3` serves the same S3 gateway but takes
// about twice as long to accept its first write: its filer waits out a
// peer scan that mini skips.)
func (s *Server) run(bin, dir, config string) error {
	log, err := os.Create(s.Log)
	if err != nil {
		return err
	}
	p := func(i int) string { return strconv.Itoa(s.ports[i]) }
	// -logtostderr: into weed.log, not glog's files in /tmp.
	args := []string{"-logtostderr", "mini", "-dir=" + filepath.Join(dir, "data"), "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
		"-master.port=" + p(0), "-master.port.grpc=" + p(1), "-volume.port=" + p(2), "-volume.port.grpc=" + p(3),
		"-filer.port=" + p(4), "-filer.port.grpc=" + p(5), "-filer.localSocket=" + filepath.Join(dir, "filer.sock"),
		"-s3.port=" + p(6), "-s3.port.grpc=" + p(7), "-s3.localSocket=" + filepath.Join(dir, "s3.sock"),
		"-admin.port=" + p(8), "-admin.port.grpc=" + p(9), "-admin.port.legacy=0",
		"-s3.port.iceberg=0", "-s3.port.lance=0", "-webdav=false", "-admin.ui=false", "-master.telemetry=false",
		"-metricsIp=127.0.0.1", "-metricsPort=" + p(10), "-s3.config=" + config,
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr, cmd.Dir = log, log, dir
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("start %s: %w", bin, err)
	}
	s.cmd, s.exited = cmd, make(chan struct{})
	go func() {
		_ = cmd.Wait()
		log.Close()
		close(s.exited)
	}()
	return nil
}

// Stop stops the server (SIGTERM, then SIGKILL after Options.StopGrace)
// and removes the gRPC sockets weed keeps in /tmp.
func (s *Server) Stop() error {
	if s.cmd == nil {
		return nil
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(s.grace):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	s.cmd = nil
	// weed names these after the gRPC ports and cannot be told otherwise.
	for i, name := range map[int]string{1: "master", 3: "volume", 5: "filer", 7: "s3", 9: "admin"} {
		_ = os.Remove(fmt.Sprintf("/tmp/seaweedfs-%s-grpc-%d.sock", name, s.ports[i]))
	}
	return nil
}

// Reads counts the object reads (GET and HEAD) of bucket that the server
// answered with success so far, from its own metrics; a test proves with
// it that nothing was read.
func (s *Server) Reads(bucket string) (int, error) {
	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(s.ports[10]) + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("s3server metrics: %s", resp.Status)
	}
	n := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		labels, value, ok := strings.Cut(strings.TrimPrefix(line, "SeaweedFS_s3_request_total{"), "} ")
		if !ok || len(labels) == len(line) || !strings.Contains(","+labels+",", `,type="GET",`) ||
			!strings.Contains(","+labels+",", `,bucket="`+bucket+`",`) || !strings.Contains(labels, `code="2`) {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return 0, fmt.Errorf("s3server metrics: %q: %w", line, err)
		}
		n += int(v)
	}
	return n, sc.Err()
}

// Exited is closed when the server's process ends.
func (s *Server) Exited() <-chan struct{} { return s.exited }

// StoreURL is the gocloud.dev/blob URL of bucket on this server, as the
// operator's --blob-url takes it: path-style, the endpoint in the query.
// Credentials come from the environment (AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY), as for any s3:// store.
func (s *Server) StoreURL(bucket string) string {
	q := url.Values{"endpoint": {s.Endpoint}, "use_path_style": {"true"}, "region": {Region}}
	return "s3://" + bucket + "?" + q.Encode()
}

// Client is an S3 client of the server with id's key pair.
func (s *Server) Client(id Identity) *s3.Client {
	return s3.New(s3.Options{
		Region:       Region,
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(id.AccessKey, id.SecretKey, ""),
	})
}

// Env is the environment that gives a process id's key pair.
func (id Identity) Env() []string {
	return []string{"AWS_ACCESS_KEY_ID=" + id.AccessKey, "AWS_SECRET_ACCESS_KEY=" + id.SecretKey, "AWS_REGION=" + Region}
}

// createBuckets waits for the server to answer, then creates the buckets.
func (s *Server) createBuckets(ctx context.Context, admin Identity, buckets []string) error {
	c := s.Client(admin)
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for _, b := range append([]string{""}, buckets...) {
		for {
			var err error
			if b == "" {
				_, err = c.ListBuckets(ctx, &s3.ListBucketsInput{}) // the server is up
			} else {
				_, err = c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(b)})
				if err != nil && (strings.Contains(err.Error(), "BucketAlreadyOwnedByYou") || strings.Contains(err.Error(), "BucketAlreadyExists")) {
					err = nil
				}
			}
			if err == nil {
				break
			}
			var re *awshttp.ResponseError
			if errors.As(err, &re) && re.HTTPStatusCode() >= 400 && re.HTTPStatusCode() < 500 {
				return fmt.Errorf("s3server: %w", err) // a refusal, not a server still starting
			}
			select {
			case <-s.exited:
				return errExited
			case <-ctx.Done():
				return fmt.Errorf("s3server: not ready within 60s: %w", err)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

// writeIdentities writes SeaweedFS's identities file: the administrator
// may do everything, the others everything on their buckets only.
func writeIdentities(path string, ids []Identity) error {
	type cred struct {
		AccessKey string `json:"accessKey"`
		SecretKey string `json:"secretKey"`
	}
	type identity struct {
		Name        string   `json:"name"`
		Credentials []cred   `json:"credentials"`
		Actions     []string `json:"actions"`
	}
	var out struct {
		Identities []identity `json:"identities"`
	}
	for _, id := range ids {
		actions := []string{"Admin", "Read", "List", "Tagging", "Write"}
		if len(id.Buckets) > 0 {
			actions = nil
			for _, b := range id.Buckets {
				for _, a := range []string{"Read", "List", "Tagging", "Write"} {
					actions = append(actions, a+":"+b)
				}
			}
		}
		out.Identities = append(out.Identities, identity{Name: id.Name, Credentials: []cred{{id.AccessKey, id.SecretKey}}, Actions: actions})
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

// freePorts finds n free ports on 127.0.0.1; s3Port, when not 0, is the
// S3 port (the seventh).
func freePorts(n, s3Port int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for len(ports) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	if s3Port != 0 {
		ports[6] = s3Port
	}
	return ports, nil
}

// Binary finds the weed executable: $EMAILDATA_S3_SERVER, else what
// hack/s3-server.sh has built (it is not built from here: that takes
// minutes; `make test` and `make run` build it first).
func Binary() (string, error) {
	if p := os.Getenv(BinaryEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w", BinaryEnv, p, err)
		}
		return p, nil
	}
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command(filepath.Join(root, "hack", "s3-server.sh"))
	cmd.Env = append(os.Environ(), "EMAILDATA_S3_BUILD=0")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("no S3-compatible server built: run hack/s3-server.sh (make test and make run ARGS=--store=s3 do) or set %s", BinaryEnv)
	}
	return strings.TrimSpace(string(out)), nil
}

// moduleRoot finds the directory of the emaildata go.mod above the
// working directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.HasPrefix(string(b), "module github.com/emaildata/emaildata\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("s3server: not inside the emaildata module")
		}
		dir = parent
	}
}

// BinaryForTest is Binary for a test: without a built server the test
// fails under CI=true and is skipped otherwise.
func BinaryForTest(t testing.TB) string {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v (CI=true: the S3-compatible server is required)", err)
		}
		t.Skip(err)
	}
	return bin
}

// ForTest starts a server for a test and stops it when the test ends.
// Without a built server the test fails under CI=true and is skipped
// otherwise.
func ForTest(t testing.TB, o Options) *Server {
	t.Helper()
	if o.Binary == "" {
		o.Binary = BinaryForTest(t)
	}
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	if o.StopGrace == 0 {
		o.StopGrace = 2 * time.Second
	}
	s, err := Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.Stop()
		if t.Failed() {
			if b, err := os.ReadFile(s.Log); err == nil {
				t.Logf("last of %s:\n%s", s.Log, b[max(0, len(b)-4000):])
			}
		}
	})
	return s
}
