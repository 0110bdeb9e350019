package controllers_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gocloud.dev/blob"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/emaildata/emaildata/api/kubescheme"
	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/controllers"
	"github.com/emaildata/emaildata/internal/kits/testkit/builders"
	"github.com/emaildata/emaildata/internal/kits/testnode"
	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/lists/pipeline"
	"github.com/emaildata/emaildata/internal/operator"
)

// The tests in this file run lists on the Job path for real: the manager
// creates Indexed Jobs, the real Job controller and scheduler run them, and
// the test node runs every pod as a worker process reading and writing the
// same file:// store. Nothing plays the Job controller.

// bigRows is the size of the large list: at least 100,000 rows, which the
// suite's 256-byte shards cap at 8 indexes.
const bigRows = 100_000

// bigList is a deterministic list of n rows mixing what verification sees:
// valid and invalid addresses, typos, role and disposable addresses,
// duplicates across shards, and quoted fields with commas and newlines.
func bigList(n int) []byte {
	var b bytes.Buffer
	b.WriteString("id,name,email\n")
	domains := []string{"example.com", "example.org", "gmial.com", "mailinator.com", "yahoo.com", "example"}
	for i := 0; i < n; i++ {
		d := domains[i%len(domains)]
		switch i % 7 {
		case 0:
			fmt.Fprintf(&b, "%d,\"Doe, %d\",user%d@%s\n", i, i, i, d)
		case 3:
			fmt.Fprintf(&b, "%d,\"multi\nline %d\",info@%s\n", i, i, d)
		case 5:
			fmt.Fprintf(&b, "%d,broken %d,not-an-email\n", i, i)
		default:
			fmt.Fprintf(&b, "%d,name %d,user%d@%s\n", i, i, i, d)
		}
	}
	return b.Bytes()
}

var bigRef struct {
	mu            sync.Mutex // the big-list tests run side by side
	input, result []byte
}

// bigReference is the big list and its result from the in-process
// executor, computed once.
func bigReference(t *testing.T) (input, result []byte) {
	t.Helper()
	bigRef.mu.Lock()
	defer bigRef.mu.Unlock()
	if bigRef.result != nil {
		return bigRef.input, bigRef.result
	}
	input = bigList(bigRows)
	name := uniqueName("big-local")
	create(t, builders.MakeEmailList(nsLocal, name).APIUpload(putUpload(t, input), testTenant).Header().EmailColumn(3).Obj())
	l := waitPhaseWithin(t, nsLocal, name, listsv1.PhaseResults, 3*time.Minute)
	bigRef.input, bigRef.result = input, readResult(t, l)
	return bigRef.input, bigRef.result
}

// createBig starts the big list on the Job path and returns it with its UID.
func createBig(t *testing.T, name string, input []byte) *listsv1.EmailList {
	t.Helper()
	create(t, builders.MakeEmailList(nsJob, name).APIUpload(putUpload(t, input), testTenant).Header().EmailColumn(3).Obj())
	return getList(t, nsJob, name)
}

func listJob(t *testing.T, ns string, l *listsv1.EmailList) *batchv1.Job {
	t.Helper()
	var job batchv1.Job
	eventually(t, 30*time.Second, "the list's job", func() (bool, string) {
		err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: controllers.JobName(l)}, &job)
		return err == nil, fmt.Sprint(err)
	})
	return &job
}

func refreshJob(t *testing.T, job *batchv1.Job) *batchv1.Job {
	t.Helper()
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(job), job); err != nil {
		t.Fatal(err)
	}
	return job
}

// podsByIndex lists a Job's pods per completion index, oldest first.
func podsByIndex(t *testing.T, job *batchv1.Job) map[string][]corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	if err := k8s.List(context.Background(), &pods, client.InNamespace(job.Namespace),
		client.MatchingLabels{batchv1.JobNameLabel: job.Name}); err != nil {
		t.Fatal(err)
	}
	sort.SliceStable(pods.Items, func(i, j int) bool {
		return pods.Items[i].CreationTimestamp.Before(&pods.Items[j].CreationTimestamp)
	})
	out := map[string][]corev1.Pod{}
	for _, p := range pods.Items {
		i := p.Labels[batchv1.JobCompletionIndexAnnotation]
		out[i] = append(out[i], p)
	}
	return out
}

func succeeded(pods []corev1.Pod) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range pods {
		if p.Status.Phase == corev1.PodSucceeded {
			out = append(out, p)
		}
	}
	return out
}

func terminatedState(p corev1.Pod) *corev1.ContainerStateTerminated {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Terminated != nil {
			return cs.State.Terminated
		}
	}
	return nil
}

func podCondition(p corev1.Pod, c corev1.PodConditionType) bool {
	for _, pc := range p.Status.Conditions {
		if pc.Type == c && pc.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// podsOf matches the pods of the Job of the list named name.
func podsOf(name string) func(*corev1.Pod) bool {
	return func(p *corev1.Pod) bool { return strings.HasPrefix(p.Labels[batchv1.JobNameLabel], name+"-") }
}

// armMidShard arms the test node to stop the worker of one index of the
// list named name the moment its process starts; midShard then lets it run
// to the middle of its shard.
func armMidShard(name string, index int) <-chan testnode.Frozen {
	of := podsOf(name)
	return plane.Node.FreezeAtStart(func(p *corev1.Pod) bool {
		return of(p) && p.Annotations[batchv1.JobCompletionIndexAnnotation] == strconv.Itoa(index)
	})
}

// midShard continues the worker armMidShard stopped and stops it again
// (SIGSTOP) as soon as it has started writing its part of the result, so
// that the test interrupts a shard in the middle however fast or busy the
// machine is. It returns the pod's name and the process id.
func midShard(t *testing.T, l *listsv1.EmailList, frozen <-chan testnode.Frozen, index int) (string, int) {
	t.Helper()
	var f testnode.Frozen
	select {
	case f = <-frozen:
	case <-time.After(2 * time.Minute):
		t.Fatalf("shard %d of %s never started", index, l.Name)
	}
	waitStopped(t, f.PID)
	parts := filepath.Join(storeDir, "lists", string(l.UID), "parts")
	prefix := fmt.Sprintf("%05d.part.", index)
	if err := syscall.Kill(f.PID, syscall.SIGCONT); err != nil {
		t.Fatalf("continue worker %d: %v", f.PID, err)
	}
	// Only a directory read between the part appearing and the stop.
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Microsecond) {
		entries, _ := os.ReadDir(parts)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), prefix) && strings.HasSuffix(e.Name(), ".tmp") {
				freeze(t, f.PID)
				return f.Name, f.PID
			}
		}
	}
	t.Fatalf("shard %d of %s never wrote its part", index, l.Name)
	return "", 0
}

// freeze stops a worker process (SIGSTOP) the test is about to interrupt,
// so that on a busy machine its shard cannot finish first. SIGKILL ends a
// stopped process; for SIGTERM, thawOnPending continues it.
func freeze(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("stop worker %d: %v", pid, err)
	}
	waitStopped(t, pid)
}

// waitStopped waits for a SIGSTOP to take effect, which happens when the
// process's threads next run: a SIGTERM sent before that (a lower signal
// number) would be handled first and never show as pending to
// thawOnPending.
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !stopped(pid); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("worker %d did not stop within 10s of SIGSTOP", pid)
		}
	}
}

// stopped reports whether every thread of pid is in the stopped state (or
// the process is gone).
func stopped(pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return true
	}
	for _, task := range tasks {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
		if err != nil {
			continue // the thread ended
		}
		// The state follows the command name's closing parenthesis.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 || i+2 >= len(stat) || (stat[i+2] != 'T' && stat[i+2] != 't') {
			return false
		}
	}
	return true
}

// thawOnPending continues a frozen process once sig is pending for it (the
// kernel then delivers sig before the process runs again), or after a
// minute.
func thawOnPending(pid int, sig syscall.Signal) {
	mask := uint64(1) << (sig - 1)
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			return // gone
		}
		if pendingSignals(string(status))&mask != 0 {
			break
		}
	}
	syscall.Kill(pid, syscall.SIGCONT)
}

// pendingSignals reads the ShdPnd and SigPnd masks of /proc/PID/status.
func pendingSignals(status string) uint64 {
	var out uint64
	for _, line := range strings.Split(status, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && (k == "ShdPnd" || k == "SigPnd") {
			n, _ := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			out |= n
		}
	}
	return out
}

// requireMidShard checks that a shard interrupted by the test had not
// finished: it wrote no summary, or one with the interruption's error.
func requireMidShard(t *testing.T, l *listsv1.EmailList, index int) {
	t.Helper()
	var sum pipeline.Summary
	err := store.ReadJSON(context.Background(), blobstore.ListKeys{UID: string(l.UID)}.Summary(index), 1<<20, &sum)
	if err == nil && sum.Error == "" {
		t.Fatalf("shard %d had already finished when it was interrupted; the test proves nothing", index)
	}
}

// TestJobPathMatchesLocal: a 100,000-row list over 8 indexes reaches Results
// through worker pods, and its result is byte-identical to the in-process
// executor's for the same input.
func TestJobPathMatchesLocal(t *testing.T) {
	input, want := bigReference(t)
	l := createBig(t, uniqueName("big-job"), input)
	job := listJob(t, nsWorkers, l)
	l = waitPhaseWithin(t, nsJob, l.Name, listsv1.PhaseResults, 3*time.Minute)
	if l.Status.Shards < 4 || l.Status.Records != bigRows {
		t.Errorf("shards %d records %d, want at least 4 shards of %d rows", l.Status.Shards, l.Status.Records, bigRows)
	}
	if got := readResult(t, l); !bytes.Equal(got, want) {
		t.Fatalf("Job path result (%d bytes) differs from the in-process one (%d bytes)", len(got), len(want))
	}
	job = refreshJob(t, job)
	if job.Status.Succeeded != l.Status.Shards || job.Status.Failed != 0 {
		t.Errorf("job succeeded %d failed %d, want %d and 0", job.Status.Succeeded, job.Status.Failed, l.Status.Shards)
	}
	for i, pods := range podsByIndex(t, job) {
		if len(pods) != 1 || pods[0].Status.Phase != corev1.PodSucceeded || pods[0].Spec.NodeName != "testnode" {
			t.Errorf("index %s: %d pods, first %s on %q", i, len(pods), pods[0].Status.Phase, pods[0].Spec.NodeName)
		}
	}
}

// TestJobPathKilledWorkerIsRetried: a worker SIGKILLed mid-shard fails its
// pod (exit 137); the Job controller retries the index within
// backoffLimitPerIndex, and the result is still byte-identical.
func TestJobPathKilledWorkerIsRetried(t *testing.T) {
	t.Parallel() // its list alone: most of its time is the Job controller's retry backoff
	input, want := bigReference(t)
	name := uniqueName("big-kill")
	frozen := armMidShard(name, 1)
	l := createBig(t, name, input)
	job := listJob(t, nsWorkers, l)
	pod, _ := midShard(t, l, frozen, 1)
	if err := plane.Node.Kill(context.Background(), nsWorkers, pod, false); err != nil {
		t.Fatal(err)
	}
	requireMidShard(t, l, 1)

	l = waitPhaseWithin(t, nsJob, l.Name, listsv1.PhaseResults, 3*time.Minute)
	if got := readResult(t, l); !bytes.Equal(got, want) {
		t.Fatalf("result after the retry (%d bytes) differs from the in-process one (%d bytes)", len(got), len(want))
	}
	job = refreshJob(t, job)
	if job.Status.Failed != 1 || ptr.Deref(job.Status.FailedIndexes, "") != "" {
		t.Errorf("job failed %d failedIndexes %q, want one counted failure and no failed index", job.Status.Failed, ptr.Deref(job.Status.FailedIndexes, ""))
	}
	pods := podsByIndex(t, job)["1"]
	if len(pods) != 2 || pods[0].Name != pod || pods[0].Status.Phase != corev1.PodFailed || pods[1].Status.Phase != corev1.PodSucceeded {
		t.Fatalf("index 1 has %d pods; want the killed one, then a successful retry", len(pods))
	}
	if term := terminatedState(pods[0]); term == nil || term.ExitCode != 137 {
		t.Errorf("killed pod terminated %+v, want exit code 137", term)
	}
	if pods[1].Annotations[batchv1.JobIndexFailureCountAnnotation] != "1" {
		t.Errorf("retry's index failure count %q, want 1", pods[1].Annotations[batchv1.JobIndexFailureCountAnnotation])
	}
}

// TestJobPathEvictedPodIsIgnored: a pod evicted mid-shard (DisruptionTarget)
// is ignored by the pod failure policy: nothing counts against the index,
// the index runs again and the list completes, byte-identical.
func TestJobPathEvictedPodIsIgnored(t *testing.T) {
	t.Parallel() // its list alone: most of its time is the Job controller's backoff
	input, want := bigReference(t)
	name := uniqueName("big-evict")
	frozen := armMidShard(name, 2)
	l := createBig(t, name, input)
	job := listJob(t, nsWorkers, l)
	pod, pid := midShard(t, l, frozen, 2)
	go thawOnPending(pid, syscall.SIGTERM) // the eviction's SIGTERM, handled as a kubelet's would be
	if err := plane.Node.Evict(context.Background(), nsWorkers, pod, "The node was low on resource: memory."); err != nil {
		t.Fatal(err)
	}
	requireMidShard(t, l, 2)

	l = waitPhaseWithin(t, nsJob, l.Name, listsv1.PhaseResults, 3*time.Minute)
	if got := readResult(t, l); !bytes.Equal(got, want) {
		t.Fatalf("result after the eviction (%d bytes) differs from the in-process one (%d bytes)", len(got), len(want))
	}
	job = refreshJob(t, job)
	if job.Status.Failed != 0 {
		t.Errorf("job status.failed %d, want 0: the eviction must not count", job.Status.Failed)
	}
	pods := podsByIndex(t, job)["2"]
	if len(pods) != 2 || pods[0].Name != pod || pods[1].Status.Phase != corev1.PodSucceeded {
		t.Fatalf("index 2 has %d pods; want the evicted one, then a successful one", len(pods))
	}
	if !podCondition(pods[0], corev1.DisruptionTarget) || pods[0].Status.Reason != "Evicted" || pods[0].Status.Phase != corev1.PodFailed {
		t.Errorf("evicted pod: phase %s reason %q conditions %v", pods[0].Status.Phase, pods[0].Status.Reason, pods[0].Status.Conditions)
	}
	if got := pods[1].Annotations[batchv1.JobIndexFailureCountAnnotation]; got != "0" {
		t.Errorf("replacement's index failure count %q, want 0", got)
	}
}

// TestJobPathBadInputFailsIndexAtOnce: a shard that meets bad input exits
// 42; its index fails at once (no retry spent), the Job fails, and the list
// goes Failed with the shard's own message naming the line.
func TestJobPathBadInputFailsIndexAtOnce(t *testing.T) {
	ctx := context.Background()
	var body strings.Builder
	body.WriteString("email\n")
	for i := 0; i < 2000; i++ {
		fmt.Fprintf(&body, "user%d@example.com\n", i)
	}
	name := uniqueName("exit42")
	release := plane.Node.Hold(podsOf(name))
	t.Cleanup(release)
	create(t, builders.MakeEmailList(nsJob, name).APIUpload(putUpload(t, []byte(body.String())), testTenant).Header().Obj())
	l := waitPhase(t, nsJob, name, listsv1.PhaseProcessing)
	job := listJob(t, nsWorkers, l)

	// While the pods wait for their "image", the staged input changes under
	// the last shard: its second row gets a NUL byte, the size stays.
	keys := blobstore.ListKeys{UID: string(l.UID)}
	plan, err := pipeline.LoadPlan(ctx, store, keys)
	if err != nil {
		t.Fatal(err)
	}
	last := len(plan.Shards) - 1
	sh := plan.Shards[last]
	data, err := store.ReadAll(ctx, plan.InputKey)
	if err != nil {
		t.Fatal(err)
	}
	second := sh.Start + int64(bytes.IndexByte(data[sh.Start:], '\n')) + 1
	data[second] = 0
	if err := store.WriteAll(ctx, plan.InputKey, data, nil); err != nil {
		t.Fatal(err)
	}
	release()

	l = waitPhaseWithin(t, nsJob, name, listsv1.PhaseFailed, 2*time.Minute)
	c := condition(l.Status.Conditions, listsv1.ConditionStalled)
	wantLine := fmt.Sprintf("line %d", sh.FirstLine+1)
	if c == nil || c.Reason != controllers.ReasonInvalidInput || !strings.Contains(c.Message, fmt.Sprintf("shard %d:", last)) ||
		!strings.Contains(c.Message, "NUL byte") || !strings.Contains(c.Message, wantLine) {
		t.Fatalf("Stalled = %+v, want InvalidInput naming shard %d, the NUL byte and %s", c, last, wantLine)
	}
	// The list fails on the Job's FailureTarget; Failed and the counts follow.
	eventually(t, 30*time.Second, "the job to be Failed", func() (bool, string) {
		job = refreshJob(t, job)
		return jobCondition(job, batchv1.JobFailed), fmt.Sprint(job.Status.Conditions)
	})
	// Only the bad index failed; the Job controller then stopped the other
	// running pods, which status.failed counts too.
	if got := ptr.Deref(job.Status.FailedIndexes, ""); got != strconv.Itoa(last) {
		t.Errorf("failedIndexes %q, want %d", got, last)
	}
	pods := podsByIndex(t, job)[strconv.Itoa(last)]
	if len(pods) != 1 {
		t.Fatalf("index %d has %d pods, want 1: no retry for bad input", last, len(pods))
	}
	if term := terminatedState(pods[0]); term == nil || term.ExitCode != controllers.ExitBadInput {
		t.Errorf("pod terminated %+v, want exit code %d", term, controllers.ExitBadInput)
	}
}

func jobCondition(job *batchv1.Job, t batchv1.JobConditionType) bool {
	for _, c := range job.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// TestJobPathManagerRestart: the manager stopped and started again while a
// list's Job runs creates no second Job, and the list completes.
func TestJobPathManagerRestart(t *testing.T) {
	t.Parallel() // its own manager and namespaces
	ns, workers := uniqueName("restart"), uniqueName("restart-workers")
	for _, n := range []string{ns, workers} {
		create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}})
	}
	create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: workers, Name: workerSA}})
	opts := jobOptions(ns, workers)
	stop := startManager(t, opts)

	input := bigList(20_000)
	name := uniqueName("restart")
	release := plane.Node.Hold(podsOf(name))
	t.Cleanup(release)
	create(t, builders.MakeEmailList(ns, name).APIUpload(putUpload(t, input), testTenant).Header().EmailColumn(3).Obj())
	l := waitPhase(t, ns, name, listsv1.PhaseProcessing)
	job := listJob(t, workers, l)
	stop()

	// A new manager finds the list Processing and its Job running.
	stop = startManager(t, opts)
	defer stop()
	time.Sleep(5 * opts.PollInterval)
	requireOneJob(t, workers, l, job.UID)
	release()

	l = waitPhaseWithin(t, ns, name, listsv1.PhaseResults, 2*time.Minute)
	requireOneJob(t, workers, l, job.UID)
	if l.Status.Result.Rows != 20_000 {
		t.Errorf("result rows %d, want 20000", l.Status.Result.Rows)
	}
}

// startManager runs a manager until the returned function stops it.
func startManager(t *testing.T, o operator.Options) func() {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	mgr, err := operator.New(ctx, cfg, o)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		t.Fatal("manager cache did not sync")
	}
	stopped := false
	return func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("manager: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("manager did not stop within 30s")
		}
	}
}

func requireOneJob(t *testing.T, ns string, l *listsv1.EmailList, uid types.UID) {
	t.Helper()
	var jobs batchv1.JobList
	if err := k8s.List(context.Background(), &jobs, client.InNamespace(ns), client.MatchingLabels{controllers.JobListUIDLabel: string(l.UID)}); err != nil {
		t.Fatal(err)
	}
	if len(jobs.Items) != 1 || jobs.Items[0].UID != uid {
		t.Fatalf("%d jobs for the list, want exactly the first one", len(jobs.Items))
	}
}

// TestJobPathDeleteMidRun: deleting a list while its shards run stops
// them: the Job and its pods go (their processes too), then the list's
// objects and upload leave the store, and nothing writes there afterwards.
func TestJobPathDeleteMidRun(t *testing.T) {
	ctx := context.Background()
	input, _ := bigReference(t)
	upload := putUpload(t, input)
	name := uniqueName("big-delete")
	frozen := armMidShard(name, 0)
	create(t, builders.MakeEmailList(nsJob, name).APIUpload(upload, testTenant).Header().EmailColumn(3).Obj())
	l := getList(t, nsJob, name)
	job := listJob(t, nsWorkers, l)
	pod, pid := midShard(t, l, frozen, 0)
	go thawOnPending(pid, syscall.SIGTERM) // the pod deletion's SIGTERM
	if err := k8s.Delete(ctx, l); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "the list to go", func() (bool, string) {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(l), &listsv1.EmailList{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(job), &batchv1.Job{}); !apierrors.IsNotFound(err) {
		t.Errorf("job still there: %v", err)
	}
	if pods := podsByIndex(t, job); len(pods) != 0 {
		t.Errorf("pods of %d indexes still there", len(pods))
	}
	if _, ok := plane.Node.PID(nsWorkers, pod); ok {
		t.Errorf("the worker process of %s still runs", pod)
	}
	time.Sleep(time.Second) // anything still writing would show now
	requireNoObjects(t, blobstore.ListKeys{UID: string(l.UID)}.Prefix())
	if ok, _ := store.Exists(ctx, upload); ok {
		t.Errorf("upload %s survived the list", upload)
	}
}

func requireNoObjects(t *testing.T, prefix string) {
	t.Helper()
	it := store.List(&blob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(context.Background())
		if err != nil {
			break
		}
		t.Errorf("object %s left in the store", obj.Key)
	}
	_ = filepath.WalkDir(filepath.Join(storeDir, filepath.FromSlash(prefix)), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			t.Errorf("file %s left in the store", path)
		}
		return nil
	})
}

// order records, from watches, the resourceVersions at which a list's Job
// met its success criteria (SuccessCriteriaMet, then Complete: the
// controller acts on either), the list's outcome was saved, and the Job got
// its TTL.
type order struct {
	ctx                        context.Context
	cancel                     context.CancelFunc
	done                       chan struct{}
	jobComplete, listDone, ttl int64
}

// watchOrder starts watching the list and its Job in the workers'
// namespace. etcd revisions order events across kinds in one cluster.
func watchOrder(t *testing.T, l *listsv1.EmailList) *order {
	t.Helper()
	wc, err := client.NewWithWatch(cfg, client.Options{Scheme: kubescheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	o := &order{done: make(chan struct{})}
	o.ctx, o.cancel = context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(o.cancel)
	lw, err := wc.Watch(o.ctx, &listsv1.EmailListList{}, client.InNamespace(l.Namespace))
	if err != nil {
		t.Fatal(err)
	}
	jw, err := wc.Watch(o.ctx, &batchv1.JobList{}, client.InNamespace(nsWorkers), client.MatchingLabels{controllers.JobListUIDLabel: string(l.UID)})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(o.done)
		defer lw.Stop()
		defer jw.Stop()
		for o.jobComplete == 0 || o.listDone == 0 || o.ttl == 0 {
			select {
			case ev := <-lw.ResultChan():
				if el, ok := ev.Object.(*listsv1.EmailList); ok && ev.Type != watch.Error && el.UID == l.UID &&
					el.Status.Phase == listsv1.PhaseResults && o.listDone == 0 {
					o.listDone = rv(el.ResourceVersion)
				}
			case ev := <-jw.ResultChan():
				job, ok := ev.Object.(*batchv1.Job)
				if !ok || ev.Type == watch.Error {
					continue
				}
				if (jobCondition(job, batchv1.JobSuccessCriteriaMet) || jobCondition(job, batchv1.JobComplete)) && o.jobComplete == 0 {
					o.jobComplete = rv(job.ResourceVersion)
				}
				if job.Spec.TTLSecondsAfterFinished != nil && o.ttl == 0 {
					o.ttl = rv(job.ResourceVersion)
				}
			case <-o.ctx.Done():
				return
			}
		}
	}()
	return o
}

// check waits for all three and requires them in that order.
func (o *order) check(t *testing.T) {
	t.Helper()
	<-o.done
	if o.jobComplete == 0 || o.listDone == 0 || o.ttl == 0 {
		t.Fatalf("saw job complete at %d, list outcome at %d, ttl at %d: something never happened", o.jobComplete, o.listDone, o.ttl)
	}
	if !(o.jobComplete < o.listDone && o.listDone < o.ttl) {
		t.Errorf("job succeeded at revision %d, list outcome saved at %d, ttl set at %d: want that order", o.jobComplete, o.listDone, o.ttl)
	}
}

func rv(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

// TestJobPathStartFailureSaysWhy: when the Job cannot be created (here the
// workers' namespace does not exist), the list says so in its Reconciling
// condition and a Warning event, and starts once the cause is fixed.
func TestJobPathStartFailureSaysWhy(t *testing.T) {
	t.Parallel() // its own manager and namespaces
	ns, workers := uniqueName("nowhere"), uniqueName("nowhere-workers")
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	stop := startManager(t, jobOptions(ns, workers))
	defer stop()
	name := uniqueName("nojob")
	create(t, builders.MakeEmailList(ns, name).APIUpload(putUpload(t, []byte("email\na@example.com\n")), testTenant).Header().Obj())
	want := fmt.Sprintf("namespaces %q not found", workers)
	eventually(t, 30*time.Second, "a condition saying why the shards cannot start", func() (bool, string) {
		l := getList(t, ns, name)
		c := condition(l.Status.Conditions, listsv1.ConditionReconciling)
		return c != nil && c.Reason == controllers.ReasonStartFailed && strings.Contains(c.Message, want), fmtConds(l.Status.Conditions)
	})
	eventually(t, 10*time.Second, "a Warning event", func() (bool, string) {
		evs := warningEvents(t, ns, name)
		return len(evs) > 0 && strings.Contains(strings.Join(evs, " "), want), strings.Join(evs, "; ")
	})
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: workers}})
	create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: workers, Name: workerSA}})
	waitPhaseWithin(t, ns, name, listsv1.PhaseResults, 2*time.Minute)
}
