package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
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
	"github.com/emaildata/emaildata/internal/kits/stackrun"
)

// stack is a running `localstack --executor=job --store=s3`: the child
// process and the REST API client are stackrun's; the Kubernetes client,
// for watching the list and counting its pods, is this benchmark's.
type stack struct {
	*stackrun.Stack
	k8s client.WithWatch
}

// startStack starts the local stack in dir and reads its banner.
func startStack(ctx context.Context, c config, weed, dir string, shards int) (*stack, error) {
	env := os.Environ()
	if weed != "" {
		env = append(env, s3server.BinaryEnv+"="+weed)
	}
	rs, err := stackrun.Start(ctx, stackrun.Options{
		Bin: filepath.Join(c.bin, "localstack"), Root: c.root, Env: env,
		LogPath: filepath.Join(dir, "localstack.log"),
		Args: []string{"--dir", filepath.Join(dir, "state"),
			"--executor=job", "--store=" + c.store, "--s3-port=0", "--worker-dir", c.bin,
			"--metrics-bind-address", "0", "--health-probe-bind-address", "0",
			"--api-listen", "127.0.0.1:0", "--api-metrics-bind-address", "0"},
		Config: stackConfig(shards, c.shardBytes),
	})
	if err != nil {
		return nil, err
	}
	st := &stack{Stack: rs}
	cfg, err := clientcmd.BuildConfigFromFlags("", rs.Kubeconfig)
	if err != nil {
		st.Kill()
		return nil, err
	}
	if st.k8s, err = client.NewWithWatch(cfg, client.Options{Scheme: kubescheme.New()}); err != nil {
		st.Kill()
		return nil, err
	}
	return st, nil
}

// upload posts the list as a client does and returns its ID.
func (st *stack) upload(ctx context.Context, path string) (int64, error) {
	q := url.Values{"service": {"email_validation"}, "email_column": {"3"}, "header": {"true"},
		"delimiter": {","}, "name": {filepath.Base(path)}}
	return st.Upload(ctx, path, q)
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
	h := sha256.New()
	var w io.Writer = h
	var f *os.File
	var bw *bufio.Writer
	if out != "" {
		if f, err = os.Create(out); err != nil {
			return sum, 0, err
		}
		bw = bufio.NewWriterSize(f, 1<<20)
		w = io.MultiWriter(h, bw)
	}
	n, err = st.Download(ctx, id, w)
	if f != nil {
		if err == nil {
			err = bw.Flush()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	copy(sum[:], h.Sum(nil))
	return sum, n, err
}

// stackConfig is the stack's Configuration: the list split into at most
// shards shards of about shardBytes each (0: the default), JSON logs.
func stackConfig(shards int, shardBytes int64) []byte {
	size := ""
	if shardBytes > 0 {
		size = fmt.Sprintf("  shardBytes: %d\n", shardBytes)
	}
	return fmt.Appendf(nil, `apiVersion: config.emaildata.io/v1alpha1
kind: Configuration
logging:
  format: json
pipeline:
  maxShards: %d
%s`, shards, size)
}
