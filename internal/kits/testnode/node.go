// Package testnode is test and local-development infrastructure, not product
// code: a stand-in for the kubelet where there is no container runtime. It
// registers a Node and runs every pod bound to it as a local process: the
// container's command and args, with its environment (including what the
// Job controller injects, such as JOB_COMPLETION_INDEX), the image name
// mapped to a directory of the project's own binaries. It reports pod status
// the way a kubelet does (Running, then terminated with the exit code and
// reason; a container that cannot start waits with the kubelet's reason,
// ErrImagePull and ImagePullBackOff for an image the node does not know,
// CreateContainerError for a missing binary, and is retried with backoff),
// stops a pod's process when the pod is deleted, and can kill a
// process (as an OOM kill or a node loss would) or evict a pod with the
// DisruptionTarget condition (as node-pressure eviction does).
//
// Memory limits are enforced: a container whose processes go over their
// memory limit is killed and reported OOMKilled (exit 137), as the kernel
// and the kubelet do (by sampling /proc, see memory.go).
//
// What it does not do: containers share the host's filesystem and network
// (volumes are not mounted: ConfigMap and Secret volumes are written into
// the pod's directory instead, and arguments and environment values naming
// a path under their mountPath are rewritten to it; workingDir and
// terminationMessagePath are ignored), CPU limits and requests are not enforced, and pods have one
// container and no init containers (others are failed with a message
// saying so). Everything
// else (scheduling, the Job controller and its policies, garbage collection)
// is the real Kubernetes code running against the same API server.
package testnode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"

	"github.com/emaildata/emaildata/internal/platform/logging"
)

// Config describes the node.
type Config struct {
	// Name of the Node object.
	Name string
	// Images maps an image name (as in the pod spec) to a directory of
	// executables: a container's command[0], "/worker" say, runs as
	// <dir>/worker. A relative directory is resolved by New, against the
	// working directory of the moment: processes run in their pod's own
	// directory, where a relative path would name nothing.
	Images map[string]string
	// Dir holds each pod's home directory and container log.
	Dir string
	// CPU and Memory are the capacity the node reports (default: this
	// machine's CPUs and 8Gi); MaxPods caps pods (default 110).
	CPU, Memory resource.Quantity
	MaxPods     int
	// StartBackoff is the first wait before a container that could not
	// start is tried again; it doubles up to MaxStartBackoff (defaults: the
	// kubelet's 10s and 5m).
	StartBackoff, MaxStartBackoff time.Duration
	// Log receives the node's own messages (default: discarded).
	Log *slog.Logger
	// MemoryInterval is how often the node samples the memory of
	// containers with a memory limit, to kill those over it as OOMKilled
	// (default DefaultMemoryInterval; see memory.go).
	MemoryInterval time.Duration
}

// Node runs the pods bound to it. Start it with Run.
type Node struct {
	cfg    Config
	client kubernetes.Interface
	queue  workqueue.TypedRateLimitingInterface[string]
	pods   corelisters.PodLister
	log    *slog.Logger

	mu     sync.Mutex
	runs   map[types.UID]*process
	starts map[types.UID]*failedStart
	holds  map[int]func(*corev1.Pod) bool
	nextID int
	ctx    context.Context
	freeze []freezeRule
}

// New returns a node talking to the API server of cfg.
func New(cfg *rest.Config, c Config) (*Node, error) {
	if c.Name == "" || c.Dir == "" {
		return nil, errors.New("testnode: Name and Dir are required")
	}
	if c.CPU.IsZero() {
		c.CPU = *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI)
	}
	if c.Memory.IsZero() {
		c.Memory = resource.MustParse("8Gi")
	}
	if c.MaxPods == 0 {
		c.MaxPods = 110
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.MemoryInterval <= 0 {
		c.MemoryInterval = DefaultMemoryInterval
	}
	if c.StartBackoff <= 0 {
		c.StartBackoff = 10 * time.Second
	}
	if c.MaxStartBackoff < c.StartBackoff {
		c.MaxStartBackoff = max(5*time.Minute, c.StartBackoff)
	}
	if err := absPaths(&c); err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Node{
		cfg: c, client: cs, log: c.Log.With("node", c.Name),
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		runs:  map[types.UID]*process{}, starts: map[types.UID]*failedStart{},
	}, nil
}

// absPaths resolves the node's directory and its image directories: the
// node's own working directory is not its processes'.
func absPaths(c *Config) error {
	dir, err := filepath.Abs(c.Dir)
	if err != nil {
		return fmt.Errorf("testnode: %w", err)
	}
	c.Dir = dir
	images := make(map[string]string, len(c.Images))
	for name, d := range c.Images {
		if d == "" {
			return fmt.Errorf("testnode: image %q has no directory", name)
		}
		if images[name], err = filepath.Abs(d); err != nil {
			return fmt.Errorf("testnode: image %q: %w", name, err)
		}
	}
	c.Images = images
	return nil
}

// Run registers the Node and runs its pods until ctx ends; then it kills
// the processes it started (as a node going down would) and returns.
func (n *Node) Run(ctx context.Context) error {
	if err := os.MkdirAll(n.cfg.Dir, 0o755); err != nil {
		return err
	}
	if err := n.register(ctx); err != nil {
		return fmt.Errorf("register node %s: %w", n.cfg.Name, err)
	}
	n.mu.Lock()
	n.ctx = ctx
	n.mu.Unlock()
	factory := informers.NewSharedInformerFactoryWithOptions(n.client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = "spec.nodeName=" + n.cfg.Name }))
	podInformer := factory.Core().V1().Pods()
	n.pods = podInformer.Lister()
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			n.queue.Add(key)
		}
	}
	if _, err := podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }, DeleteFunc: enqueue,
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	go n.heartbeat(ctx)
	go n.enforceMemory(ctx)

	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n.next(ctx) {
			}
		}()
	}
	<-ctx.Done()
	n.queue.ShutDown()
	wg.Wait()
	factory.Shutdown()
	n.killAll()
	return nil
}

func (n *Node) next(ctx context.Context) bool {
	key, quit := n.queue.Get()
	if quit {
		return false
	}
	defer n.queue.Done(key)
	if err := n.sync(ctx, key); err != nil && ctx.Err() == nil {
		n.log.Warn("sync pod", "pod", key, logging.KeyError, err)
		n.queue.AddRateLimited(key)
		return true
	}
	n.queue.Forget(key)
	return true
}

// register creates the Node, or makes an existing one Ready again.
func (n *Node) register(ctx context.Context) error {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.cfg.Name, Labels: map[string]string{
		corev1.LabelHostname: n.cfg.Name, corev1.LabelOSStable: runtime.GOOS, corev1.LabelArchStable: runtime.GOARCH,
		"node.emaildata.io/testnode": "true",
	}}}
	if _, err := n.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := n.client.CoreV1().Nodes().Get(ctx, n.cfg.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		res := corev1.ResourceList{
			corev1.ResourceCPU:    n.cfg.CPU,
			corev1.ResourceMemory: n.cfg.Memory,
			corev1.ResourcePods:   *resource.NewQuantity(int64(n.cfg.MaxPods), resource.DecimalSI),
		}
		cur.Status.Capacity, cur.Status.Allocatable = res, res
		cur.Status.Conditions = []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			Message: "testnode runs pods as local processes", LastHeartbeatTime: now, LastTransitionTime: now,
		}}
		cur.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}, {Type: corev1.NodeHostName, Address: n.cfg.Name}}
		cur.Status.NodeInfo = corev1.NodeSystemInfo{
			KubeletVersion: "testnode", OperatingSystem: runtime.GOOS, Architecture: runtime.GOARCH,
			ContainerRuntimeVersion: "process://",
		}
		_, err = n.client.CoreV1().Nodes().UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

// heartbeat renews the node's Lease, as the kubelet does, so the node
// lifecycle controller keeps the node Ready (and lifts the not-ready taint
// the API server puts on new nodes).
func (n *Node) heartbeat(ctx context.Context) {
	for {
		if err := n.renewLease(ctx); err != nil && ctx.Err() == nil {
			n.log.Warn("renew lease", logging.KeyError, err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(leaseRenewInterval):
		}
	}
}

const (
	leaseDuration      = 40 // seconds, the kubelet's default
	leaseRenewInterval = 10 * time.Second
)

func (n *Node) renewLease(ctx context.Context) error {
	leases := n.client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	now := metav1.NewMicroTime(time.Now())
	lease, err := leases.Get(ctx, n.cfg.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		node, err := n.client.CoreV1().Nodes().Get(ctx, n.cfg.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		lease = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: n.cfg.Name, Namespace: corev1.NamespaceNodeLease, OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(n.cfg.Name), LeaseDurationSeconds: ptr.To(int32(leaseDuration)), RenewTime: &now},
		}
		_, err = leases.Create(ctx, lease, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	lease.Spec.RenewTime = &now
	_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	return err
}

// Hold keeps the pods match accepts that are bound from then on Pending
// (ContainerCreating), as a slow image pull would, until the returned
// release is called (once or more); tests use it to act before a pod
// starts. Other pods, and other tests' holds, are not affected.
func (n *Node) Hold(match func(*corev1.Pod) bool) (release func()) {
	n.mu.Lock()
	if n.holds == nil {
		n.holds = map[int]func(*corev1.Pod) bool{}
	}
	id := n.nextID
	n.nextID++
	n.holds[id] = match
	n.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { n.release(id) }) }
}

// release drops a hold and starts the pods it kept waiting.
func (n *Node) release(id int) {
	n.mu.Lock()
	delete(n.holds, id)
	n.mu.Unlock()
	if n.pods == nil {
		return
	}
	pods, _ := n.pods.List(everything)
	for _, p := range pods {
		n.queue.Add(p.Namespace + "/" + p.Name)
	}
}

// Frozen is a pod whose process FreezeAtStart stopped.
type Frozen struct {
	Namespace, Name string
	PID             int
}

type freezeRule struct {
	match func(*corev1.Pod) bool
	out   chan Frozen
}

// FreezeAtStart stops (SIGSTOP) the process of the next pod match accepts
// the moment it starts, before it has done any work, and sends it on the
// returned channel; the caller continues it with SIGCONT. Tests use it to
// interrupt work at a point of their choosing however fast the machine is.
func (n *Node) FreezeAtStart(match func(*corev1.Pod) bool) <-chan Frozen {
	out := make(chan Frozen, 1)
	n.mu.Lock()
	n.freeze = append(n.freeze, freezeRule{match, out})
	n.mu.Unlock()
	return out
}

// frozenAtStart applies the first rule that matches pod to its new process.
func (n *Node) frozenAtStart(pod *corev1.Pod, p *process) {
	n.mu.Lock()
	var rule *freezeRule
	for i := range n.freeze {
		if n.freeze[i].match(pod) {
			r := n.freeze[i]
			rule = &r
			n.freeze = append(n.freeze[:i], n.freeze[i+1:]...)
			break
		}
	}
	n.mu.Unlock()
	if rule == nil {
		return
	}
	_ = syscall.Kill(p.pid, syscall.SIGSTOP)
	rule.out <- Frozen{Namespace: pod.Namespace, Name: pod.Name, PID: p.pid}
}

func (n *Node) held(pod *corev1.Pod) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, match := range n.holds {
		if match(pod) {
			return true
		}
	}
	return false
}

func (n *Node) podDir(pod *corev1.Pod) string {
	return filepath.Join(n.cfg.Dir, pod.Namespace+"_"+pod.Name+"_"+string(pod.UID))
}

// statusUpdate rereads the pod, applies mutate to its status and writes it,
// retrying on conflicts. A pod that is gone or replaced is left alone.
func (n *Node) statusUpdate(ctx context.Context, ns, name string, uid types.UID, mutate func(*corev1.Pod)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod, err := n.client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if pod.UID != uid {
			return nil
		}
		mutate(pod)
		_, err = n.client.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}

// finalDelete removes a terminated pod, as the kubelet does once its
// containers are gone.
func (n *Node) finalDelete(ctx context.Context, pod *corev1.Pod) error {
	err := n.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To(int64(0)),
		Preconditions:      &metav1.Preconditions{UID: ptr.To(pod.UID)},
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

func setCondition(pod *corev1.Pod, c corev1.PodCondition) {
	now := metav1.Now()
	for i := range pod.Status.Conditions {
		old := &pod.Status.Conditions[i]
		if old.Type != c.Type {
			continue
		}
		if old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		} else {
			c.LastTransitionTime = now
		}
		*old = c
		return
	}
	c.LastTransitionTime = now
	pod.Status.Conditions = append(pod.Status.Conditions, c)
}

func isTerminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// waitTimeout is how long Kill and Evict wait for a pod's status.
const waitTimeout = 30 * time.Second
