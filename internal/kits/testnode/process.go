package testnode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// processSpec is what a pod's container becomes on this node.
type processSpec struct {
	namespace, name string
	uid             types.UID
	path            string
	args            []string
	env             []string
	dir             string
	logPath         string
	// fallbackToLogs: a failed container's message is the tail of its log.
	fallbackToLogs bool
	// memLimit is the container's memory limit in bytes (0: none); see
	// memory.go.
	memLimit int64
}

// processSpec resolves the container's executable and environment. Its
// error comes with the waiting reason the kubelet would report.
func (n *Node) processSpec(ctx context.Context, pod *corev1.Pod) (processSpec, string, error) {
	c := pod.Spec.Containers[0]
	imageDir, ok := n.cfg.Images[c.Image]
	if !ok {
		return processSpec{}, reasonErrImagePull, fmt.Errorf("failed to pull image %q: the test node does not know it (its images: %s)", c.Image, n.imageNames())
	}
	env, err := n.containerEnv(ctx, pod, &c)
	if err != nil {
		return processSpec{}, reasonCreateConfigError, err
	}
	if len(c.Command) == 0 {
		return processSpec{}, reasonCreateConfigError, errors.New("the test node needs the container's command (it has no image entrypoints)")
	}
	lookup := envLookup(env)
	argv := make([]string, 0, len(c.Command)+len(c.Args))
	for _, a := range append(append([]string{}, c.Command...), c.Args...) {
		argv = append(argv, expand(a, lookup))
	}
	// As runc does before it reports a container created: the executable
	// must be there (a missing one is CRI-O's CreateContainerError).
	path := filepath.Join(imageDir, filepath.Clean("/"+argv[0]))
	if fi, err := os.Stat(path); err != nil {
		return processSpec{}, reasonCreateContainerError, fmt.Errorf("exec: %q: %w", argv[0], err)
	} else if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return processSpec{}, reasonCreateContainerError, fmt.Errorf("exec: %q: permission denied (%s is not an executable file)", argv[0], path)
	}
	dir := n.podDir(pod)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return processSpec{}, reasonCreateContainerError, err
	}
	mounts, err := n.mountVolumes(ctx, pod, &c, dir)
	if err != nil {
		return processSpec{}, reasonContainerCreating, err
	}
	for i := range argv[1:] {
		argv[i+1] = remount(argv[i+1], mounts)
	}
	for i, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		env[i] = k + "=" + remount(v, mounts)
	}
	base := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOSTNAME=" + pod.Name, "HOME=" + dir}
	return processSpec{
		namespace: pod.Namespace, name: pod.Name, uid: pod.UID,
		path: path, args: argv[1:], env: append(base, env...), dir: dir,
		logPath:        filepath.Join(dir, c.Name+".log"),
		fallbackToLogs: c.TerminationMessagePolicy == corev1.TerminationMessageFallbackToLogsOnError,
		memLimit:       memoryLimit(&c),
	}, "", nil
}

// imageNames lists the images the node knows, sorted.
func (n *Node) imageNames() string {
	names := slices.Sorted(maps.Keys(n.cfg.Images))
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// containerEnv builds NAME=value pairs from envFrom, then env (later wins),
// resolving references the way the kubelet does.
func (n *Node) containerEnv(ctx context.Context, pod *corev1.Pod, c *corev1.Container) ([]string, error) {
	var out []string
	vals := map[string]string{}
	set := func(k, v string) {
		vals[k] = v
		out = append(out, k+"="+v)
	}
	for _, from := range c.EnvFrom {
		data, err := n.envSource(ctx, pod.Namespace, from)
		if err != nil {
			return nil, err
		}
		for k, v := range data {
			set(from.Prefix+k, v)
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			set(e.Name, expand(e.Value, func(k string) (string, bool) { v, ok := vals[k]; return v, ok }))
			continue
		}
		v, err := n.envValue(ctx, pod, e.ValueFrom)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		set(e.Name, v)
	}
	return out, nil
}

func (n *Node) envSource(ctx context.Context, ns string, from corev1.EnvFromSource) (map[string]string, error) {
	switch {
	case from.SecretRef != nil:
		s, err := n.client.CoreV1().Secrets(ns).Get(ctx, from.SecretRef.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) && ptrTrue(from.SecretRef.Optional) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("secret %q: %w", from.SecretRef.Name, err)
		}
		m := map[string]string{}
		for k, v := range s.Data {
			m[k] = string(v)
		}
		return m, nil
	case from.ConfigMapRef != nil:
		cm, err := n.client.CoreV1().ConfigMaps(ns).Get(ctx, from.ConfigMapRef.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) && ptrTrue(from.ConfigMapRef.Optional) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("configmap %q: %w", from.ConfigMapRef.Name, err)
		}
		return cm.Data, nil
	}
	return nil, errors.New("envFrom without a source")
}

func (n *Node) envValue(ctx context.Context, pod *corev1.Pod, from *corev1.EnvVarSource) (string, error) {
	switch {
	case from.FieldRef != nil:
		return podField(pod, from.FieldRef.FieldPath)
	case from.SecretKeyRef != nil:
		ref := from.SecretKeyRef
		s, err := n.client.CoreV1().Secrets(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			if apierrors.IsNotFound(err) && ptrTrue(ref.Optional) {
				return "", nil
			}
			return "", fmt.Errorf("secret %q: %w", ref.Name, err)
		}
		v, ok := s.Data[ref.Key]
		if !ok && !ptrTrue(ref.Optional) {
			return "", fmt.Errorf("secret %q has no key %q", ref.Name, ref.Key)
		}
		return string(v), nil
	case from.ConfigMapKeyRef != nil:
		ref := from.ConfigMapKeyRef
		cm, err := n.client.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			if apierrors.IsNotFound(err) && ptrTrue(ref.Optional) {
				return "", nil
			}
			return "", fmt.Errorf("configmap %q: %w", ref.Name, err)
		}
		v, ok := cm.Data[ref.Key]
		if !ok && !ptrTrue(ref.Optional) {
			return "", fmt.Errorf("configmap %q has no key %q", ref.Name, ref.Key)
		}
		return v, nil
	}
	return "", errors.New("the test node resolves fieldRef, secretKeyRef and configMapKeyRef only")
}

// podField resolves a downward API field path.
func podField(pod *corev1.Pod, path string) (string, error) {
	for _, m := range []struct {
		prefix string
		from   map[string]string
	}{{"metadata.labels['", pod.Labels}, {"metadata.annotations['", pod.Annotations}} {
		if strings.HasPrefix(path, m.prefix) && strings.HasSuffix(path, "']") {
			return m.from[strings.TrimSuffix(strings.TrimPrefix(path, m.prefix), "']")], nil
		}
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP", "status.podIP":
		return "127.0.0.1", nil
	}
	return "", fmt.Errorf("field path %q is not supported by the test node", path)
}

func envLookup(env []string) func(string) (string, bool) {
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// expand replaces $(VAR) with the variable's value, as Kubernetes does in
// command, args and env values: $$ is a literal $, unknown references stay.
func expand(s string, lookup func(string) (string, bool)) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
			continue
		case '(':
			if end := strings.IndexByte(s[i+2:], ')'); end >= 0 {
				name := s[i+2 : i+2+end]
				if v, ok := lookup(name); ok {
					b.WriteString(v)
				} else {
					b.WriteString(s[i : i+3+end])
				}
				i += 2 + end
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func ptrTrue(b *bool) bool { return b != nil && *b }

// process is a running (or ended) container.
type process struct {
	processSpec
	pid     int
	cmd     *exec.Cmd
	started time.Time
	done    chan struct{}

	mu       sync.Mutex
	finished time.Time
	code     int32
	reason   string // set by kill: OOMKilled or Error
	evicted  string // eviction message
	ended    bool
	// spawnHWM is the node process's own peak RSS just after this one
	// started.
	spawnHWM int64
	// peakSampled is the largest memory sample of a limited container.
	peakSampled int64
}

func startProcess(s processSpec) (*process, error) {
	logFile, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(s.path, s.args...)
	cmd.Env, cmd.Dir = s.env, s.dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	p := &process{processSpec: s, cmd: cmd, pid: cmd.Process.Pid, started: time.Now(), done: make(chan struct{})}
	// Read after the exec: the node's own peak then bounds what wait4's
	// ru_maxrss may have inherited from it (see overLimitAtExit).
	_, p.spawnHWM, _ = readMemory(os.Getpid())
	go func() {
		err := cmd.Wait()
		logFile.Close()
		p.mu.Lock()
		p.finished, p.ended = time.Now(), true
		p.code = exitCode(cmd, err)
		if p.reason == "" && p.evicted == "" && p.overLimitAtExit(cmd.ProcessState) {
			p.reason, p.code = reasonOOMKilled, 128+int32(syscall.SIGKILL)
		}
		p.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

// exitCode is what a container runtime reports: the exit status, or 128
// plus the signal that ended the process.
func exitCode(cmd *exec.Cmd, err error) int32 {
	if cmd.ProcessState == nil {
		return 128
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int32(ws.Signal())
	}
	if code := cmd.ProcessState.ExitCode(); code >= 0 {
		return int32(code)
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return 1
	}
	return 128
}

func (p *process) exited() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ended
}

func (p *process) containerID() string { return "process://" + strconv.Itoa(p.pid) }

// signal sends sig to the process group (the container's processes).
func (p *process) signal(sig syscall.Signal) {
	_ = syscall.Kill(-p.pid, sig)
}

// kill ends the process with SIGKILL; reason is recorded for its status.
func (p *process) kill(reason string) {
	p.mu.Lock()
	if !p.ended && reason != "" {
		p.reason = reason
	}
	p.mu.Unlock()
	p.signal(syscall.SIGKILL)
}

// terminate sends SIGTERM, then SIGKILL when the process outlives grace.
func (p *process) terminate(grace time.Duration) {
	p.signal(syscall.SIGTERM)
	go func() {
		select {
		case <-p.done:
		case <-time.After(grace):
			p.signal(syscall.SIGKILL)
		}
	}()
}

func (p *process) evict(message string, grace time.Duration) {
	p.mu.Lock()
	p.evicted = message
	if p.evicted == "" {
		p.evicted = "The node was low on resource"
	}
	p.mu.Unlock()
	p.terminate(grace)
}

// outcome is the terminated state of an ended process.
func (p *process) outcome() (code int32, reason, message, evicted string) {
	p.mu.Lock()
	code, reason, evicted = p.code, p.reason, p.evicted
	p.mu.Unlock()
	switch {
	case reason != "":
	case code == 0:
		reason = "Completed"
	default:
		reason = "Error"
	}
	if code != 0 && p.fallbackToLogs {
		message = logTail(p.logPath, 80, 2048)
	}
	return code, reason, message, evicted
}

// logTail returns the last lines of a log, at most max bytes, as the
// kubelet does for FallbackToLogsOnError.
func logTail(path string, lines, max int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > int64(max) {
		_, _ = f.Seek(-int64(max), io.SeekEnd)
	}
	b, _ := io.ReadAll(f)
	b = bytes.TrimRight(b, "\n")
	if parts := bytes.Split(b, []byte("\n")); len(parts) > lines {
		b = bytes.Join(parts[len(parts)-lines:], []byte("\n"))
	}
	return string(b)
}
