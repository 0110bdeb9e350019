package jobplane_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/emaildata/emaildata/internal/kits/jobplane"
)

var (
	k8s   client.Client
	plane *jobplane.Plane
	// lateImage is the directory of the image "late", empty at first.
	lateImage string
)

// TestMain runs envtest plus the plane, with an image "shell" whose /sh is
// the system shell, so Jobs here are small shell scripts.
func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set; run the tests with `make test`")
		return 1
	}
	env := &envtest.Environment{}
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "start envtest:", err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	dir, err := os.MkdirTemp("", "jobplane-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	images := filepath.Join(dir, "images", "shell")
	if err := os.MkdirAll(images, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := os.Symlink("/bin/sh", filepath.Join(images, "sh")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// "late" gets its /sh only when a test puts it there.
	lateImage = filepath.Join(dir, "images", "late")
	if err := os.MkdirAll(lateImage, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	plane, err = jobplane.Start(context.Background(), jobplane.Options{
		Env: env, AssetsDir: assets, Dir: filepath.Join(dir, "plane"),
		Images:       map[string]string{"shell": images, "late": lateImage},
		StartBackoff: time.Second,
		Log:          slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start job plane:", err)
		return 1
	}
	defer func() { _ = plane.Stop() }()
	if k8s, err = client.New(cfg, client.Options{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	if code != 0 {
		for _, f := range []string{"kube-controller-manager.log", "kube-scheduler.log"} {
			if b, err := os.ReadFile(filepath.Join(plane.Dir, f)); err == nil {
				fmt.Fprintf(os.Stderr, "--- last of %s:\n%s\n", f, tail(string(b), 3000))
			}
		}
	}
	return code
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

var seq int

// shellJob is an Indexed Job running script in /bin/sh, with the worker
// Jobs' failure policy: exit 42 fails the index, disruptions are ignored.
func shellJob(t *testing.T, completions int32, script string) *batchv1.Job {
	t.Helper()
	return shellJobOf(t, "shell", completions, script)
}

// shellJobOf is shellJob with the container's image.
func shellJobOf(t *testing.T, image string, completions int32, script string) *batchv1.Job {
	t.Helper()
	seq++
	job := shellJobSpec(fmt.Sprintf("shell-%d", seq), image, completions, script)
	if err := k8s.Create(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	return job
}

func shellJobSpec(name, image string, completions int32, script string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: batchv1.JobSpec{
			CompletionMode:       ptr.To(batchv1.IndexedCompletion),
			Completions:          ptr.To(completions),
			Parallelism:          ptr.To(completions),
			BackoffLimitPerIndex: ptr.To(int32(1)),
			MaxFailedIndexes:     ptr.To(int32(0)),
			PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
				{Action: batchv1.PodFailurePolicyActionFailIndex, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
					Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{42}}},
				{Action: batchv1.PodFailurePolicyActionIgnore, OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{
					{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}}},
			}},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy:                 corev1.RestartPolicyNever,
				TerminationGracePeriodSeconds: ptr.To(int64(2)),
				Containers: []corev1.Container{{
					Name: "main", Image: image, Command: []string{"/sh", "-c"}, Args: []string{script},
					Env: []corev1.EnvVar{
						{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
						{Name: "GREETING", Value: "hello $(POD)"},
					},
					TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
				}},
			}},
		},
	}
}

func waitJob(t *testing.T, job *batchv1.Job, want batchv1.JobConditionType) *batchv1.Job {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(job), job); err != nil {
			t.Fatal(err)
		}
		for _, c := range job.Status.Conditions {
			if c.Status != corev1.ConditionTrue {
				continue
			}
			if c.Type == want {
				return job
			}
			if c.Type == batchv1.JobFailed || c.Type == batchv1.JobComplete {
				t.Fatalf("job %s ended %s (%s: %s), want %s", job.Name, c.Type, c.Reason, c.Message, want)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("job %s: no %s condition within 90s; status %+v", job.Name, want, job.Status)
	return nil
}

// podsByIndex lists the job's pods, oldest first, per completion index.
func podsByIndex(t *testing.T, job *batchv1.Job) map[string][]corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	if err := k8s.List(context.Background(), &pods, client.InNamespace(job.Namespace), client.MatchingLabels{"job-name": job.Name}); err != nil {
		t.Fatal(err)
	}
	sort.Slice(pods.Items, func(i, j int) bool {
		return pods.Items[i].CreationTimestamp.Before(&pods.Items[j].CreationTimestamp) ||
			pods.Items[i].CreationTimestamp.Equal(&pods.Items[j].CreationTimestamp) && pods.Items[i].Name < pods.Items[j].Name
	})
	out := map[string][]corev1.Pod{}
	for _, p := range pods.Items {
		i := p.Labels[batchv1.JobCompletionIndexAnnotation]
		out[i] = append(out[i], p)
	}
	return out
}

func terminated(p corev1.Pod) *corev1.ContainerStateTerminated {
	if len(p.Status.ContainerStatuses) != 1 {
		return nil
	}
	return p.Status.ContainerStatuses[0].State.Terminated
}

// Every index runs once as a process with its index, pod name and expanded
// env, and the real Job controller completes the Job from the pods' status.
func TestIndexedJobRunsEveryIndex(t *testing.T) {
	out := t.TempDir()
	job := shellJob(t, 3, `echo "$JOB_COMPLETION_INDEX $GREETING" > `+out+`/$JOB_COMPLETION_INDEX`)
	job = waitJob(t, job, batchv1.JobComplete)
	if job.Status.Succeeded != 3 || job.Status.CompletedIndexes != "0-2" || job.Status.Failed != 0 {
		t.Errorf("status succeeded=%d completed=%q failed=%d", job.Status.Succeeded, job.Status.CompletedIndexes, job.Status.Failed)
	}
	for i, pods := range podsByIndex(t, job) {
		if len(pods) != 1 {
			t.Fatalf("index %s has %d pods, want 1", i, len(pods))
		}
		p := pods[0]
		b, err := os.ReadFile(filepath.Join(out, i))
		if want := i + " hello " + p.Name + "\n"; err != nil || string(b) != want {
			t.Errorf("index %s wrote %q (%v), want %q", i, b, err, want)
		}
		term := terminated(p)
		if p.Status.Phase != corev1.PodSucceeded || term == nil || term.ExitCode != 0 || term.Reason != "Completed" || p.Spec.NodeName != "testnode" {
			t.Errorf("pod %s: phase %s node %q terminated %+v", p.Name, p.Status.Phase, p.Spec.NodeName, term)
		}
	}
}

// Exit 42 fails its index at once (no retry), and the Job fails.
func TestExit42FailsIndex(t *testing.T) {
	job := shellJob(t, 2, `if [ "$JOB_COMPLETION_INDEX" = 1 ]; then echo "row 7 is bad" >&2; exit 42; fi`)
	job = waitJob(t, job, batchv1.JobFailed)
	if job.Status.FailedIndexes == nil || *job.Status.FailedIndexes != "1" || job.Status.Failed != 1 {
		t.Errorf("failedIndexes %v failed %d, want index 1 failed once", job.Status.FailedIndexes, job.Status.Failed)
	}
	pods := podsByIndex(t, job)["1"]
	if len(pods) != 1 {
		t.Fatalf("index 1 has %d pods, want 1 (no retry)", len(pods))
	}
	if term := terminated(pods[0]); term == nil || term.ExitCode != 42 || term.Reason != "Error" || !strings.Contains(term.Message, "row 7 is bad") {
		t.Errorf("terminated %+v, want exit 42 with the log's last line", term)
	}
}

// A process killed as the OOM killer would fails its pod and is retried
// within backoffLimitPerIndex; an evicted pod (DisruptionTarget) is not
// counted. (The controller tests kill workers as a node loss would.)
func TestKillRetriesAndEvictionIsIgnored(t *testing.T) {
	ctx := context.Background()
	gate := filepath.Join(t.TempDir(), "go")
	job := shellJob(t, 2, `while [ ! -e `+gate+` ]; do sleep 0.05; done`)
	first := map[string]corev1.Pod{}
	deadline := time.Now().Add(60 * time.Second)
	for len(first) < 2 && time.Now().Before(deadline) {
		for i, pods := range podsByIndex(t, job) {
			if pods[0].Status.Phase == corev1.PodRunning {
				first[i] = pods[0]
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(first) < 2 {
		t.Fatalf("pods not running within 60s: %v", podsByIndex(t, job))
	}
	pid, _ := plane.Node.PID("default", first["0"].Name)
	if err := plane.Node.Kill(ctx, "default", first["0"].Name, true); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("process %d still exists after Kill", pid)
	}
	if err := plane.Node.Evict(ctx, "default", first["1"].Name, "test eviction"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	job = waitJob(t, job, batchv1.JobComplete)
	if job.Status.Failed != 1 || job.Status.CompletedIndexes != "0,1" {
		t.Errorf("failed %d completed %q, want 1 counted failure (the kill) and both indexes done", job.Status.Failed, job.Status.CompletedIndexes)
	}
	byIndex := podsByIndex(t, job)
	if pods := byIndex["0"]; len(pods) != 2 || terminated(pods[0]) == nil || terminated(pods[0]).ExitCode != 137 ||
		terminated(pods[0]).Reason != "OOMKilled" || pods[0].Status.Phase != corev1.PodFailed {
		t.Errorf("index 0 pods %d, first terminated %+v: want a failed, OOMKilled exit-137 pod and a retry", len(pods), terminated(pods[0]))
	}
	pods := byIndex["1"]
	if len(pods) != 2 || pods[0].Status.Reason != "Evicted" || !hasCondition(pods[0], corev1.DisruptionTarget) {
		t.Errorf("index 1 pods %d, first reason %q conditions %v: want an evicted pod and a replacement", len(pods), pods[0].Status.Reason, pods[0].Status.Conditions)
	}
}

// Deleting a Job with foreground propagation stops its processes and
// removes its pods: the garbage collector and the node do it together.
func TestDeleteStopsProcesses(t *testing.T) {
	ctx := context.Background()
	job := shellJob(t, 1, `sleep 300`)
	var pod corev1.Pod
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if pods := podsByIndex(t, job)["0"]; len(pods) == 1 && pods[0].Status.Phase == corev1.PodRunning {
			pod = pods[0]
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	pid, ok := plane.Node.PID("default", pod.Name)
	if !ok {
		t.Fatalf("no running process for the job's pod")
	}
	if err := k8s.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(job), &batchv1.Job{})
		if client.IgnoreNotFound(err) == nil && err != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if pods := podsByIndex(t, job); len(pods) != 0 {
		t.Errorf("pods left: %v", pods)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("process %d of the deleted pod still runs", pid)
	}
}

func hasCondition(p corev1.Pod, c corev1.PodConditionType) bool {
	for _, pc := range p.Status.Conditions {
		if pc.Type == c && pc.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// limitedJob is shellJob with a memory limit on its container.
func limitedJob(t *testing.T, limit, script string) *batchv1.Job {
	t.Helper()
	seq++
	job := shellJobSpec(fmt.Sprintf("limited-%d", seq), "shell", 1, script)
	job.Spec.Template.Spec.Containers[0].Resources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(limit)},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(limit)},
	}
	if err := k8s.Create(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	return job
}

// A pod whose processes go over their memory limit is killed as the
// kernel would, and reported OOMKilled with exit code 137, and the Job
// controller treats it as a cluster's would: the index is retried within
// backoffLimitPerIndex, then fails. The memory is taken by a child of the
// shell (tail buffering /dev/zero, which has no newline), so only the sum
// over the process tree is over the limit; ulimit -v stops tail at 1 GiB
// should the node fail to kill it, so a broken node cannot exhaust the
// machine's memory (tail then exits 1, not 137).
func TestOverMemoryLimitIsOOMKilled(t *testing.T) {
	job := limitedJob(t, "64Mi", `ulimit -v 1048576; tail /dev/zero; echo "tail exited $?"`)
	job = waitJob(t, job, batchv1.JobFailed)
	if got := ptr.Deref(job.Status.FailedIndexes, ""); got != "0" || job.Status.Failed != 2 {
		t.Errorf("failedIndexes %q failed %d, want index 0 failed after a retry", got, job.Status.Failed)
	}
	pods := podsByIndex(t, job)["0"]
	if len(pods) != 2 {
		t.Fatalf("index 0 has %d pods, want 2 (a retry)", len(pods))
	}
	for _, p := range pods {
		if term := terminated(p); p.Status.Phase != corev1.PodFailed || term == nil || term.ExitCode != 137 || term.Reason != "OOMKilled" {
			t.Errorf("pod %s: phase %s terminated %+v, want Failed, OOMKilled, exit 137", p.Name, p.Status.Phase, term)
		}
	}
}

// A pod that stays under its limit is left alone.
func TestUnderMemoryLimitCompletes(t *testing.T) {
	job := limitedJob(t, "64Mi", `x=$(head -c 1000000 /dev/zero | tr '\0' a); sleep 0.5; echo ${#x}`)
	job = waitJob(t, job, batchv1.JobComplete)
	pods := podsByIndex(t, job)["0"]
	if len(pods) != 1 || terminated(pods[0]) == nil || terminated(pods[0]).Reason != "Completed" {
		t.Errorf("pods %d, want one Completed", len(pods))
	}
}

// waitWaiting waits for the job's first pod to wait with reason and a
// message containing each of want, and returns that message.
func waitWaiting(t *testing.T, job *batchv1.Job, reason string, want ...string) string {
	t.Helper()
	last := "no pod"
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		pods := podsByIndex(t, job)["0"]
		if len(pods) == 0 || len(pods[0].Status.ContainerStatuses) != 1 {
			continue
		}
		p := pods[0]
		if p.Status.Phase != corev1.PodPending {
			t.Fatalf("pod %s is %s, want Pending", p.Name, p.Status.Phase)
		}
		w := p.Status.ContainerStatuses[0].State.Waiting
		if w == nil {
			continue
		}
		last = w.Reason + ": " + w.Message
		if w.Reason != reason {
			continue
		}
		for _, s := range want {
			if !strings.Contains(w.Message, s) {
				t.Fatalf("pod %s waits with %s, message %q lacks %q", p.Name, reason, w.Message, s)
			}
		}
		return w.Message
	}
	t.Fatalf("job %s: its pod never waited with %s; last: %s", job.Name, reason, last)
	return ""
}

// A container the node cannot start waits as under a kubelet, and is tried
// again: an unknown image shows ErrImagePull, then ImagePullBackOff; a
// missing binary shows CreateContainerError with the exec error, and starts
// once the binary is there.
func TestContainerCannotStart(t *testing.T) {
	unknown := shellJobOf(t, "registry.example/nowhere:1", 1, "true")
	waitWaiting(t, unknown, "ErrImagePull", `failed to pull image "registry.example/nowhere:1"`, "late, shell")
	waitWaiting(t, unknown, "ImagePullBackOff", `Back-off pulling image "registry.example/nowhere:1": ErrImagePull: failed to pull`)
	// Tried again (the backoff is 1s here): ErrImagePull comes back.
	waitWaiting(t, unknown, "ErrImagePull")
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(unknown), unknown); err != nil {
		t.Fatal(err)
	}
	if len(unknown.Status.Conditions) != 0 || unknown.Status.Failed != 0 {
		t.Errorf("job of the unknown image: conditions %v failed %d; a pod that cannot start is no failure to the Job controller",
			unknown.Status.Conditions, unknown.Status.Failed)
	}

	late := shellJobOf(t, "late", 1, "echo started")
	waitWaiting(t, late, "CreateContainerError", `exec: "/sh": stat `+filepath.Join(lateImage, "sh")+": no such file or directory")
	if err := os.Symlink("/bin/sh", filepath.Join(lateImage, "sh")); err != nil {
		t.Fatal(err)
	}
	late = waitJob(t, late, batchv1.JobComplete)
	pods := podsByIndex(t, late)["0"]
	if len(pods) != 1 || pods[0].Status.Phase != corev1.PodSucceeded {
		t.Fatalf("pods of the late job: %v, want the one pod, Succeeded once its binary was there", pods)
	}
}
