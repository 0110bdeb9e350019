package controllers_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/controllers"
	"github.com/emaildata/emaildata/internal/kits/testkit/builders"
	"github.com/emaildata/emaildata/internal/operator"
)

// The tests in this file run lists (and a Dataset) whose worker pods cannot
// start, on the real Job path: the real scheduler and Job controller, and
// the test node reporting the kubelet's waiting reasons. Each runs its own
// manager, on a fake clock that the test moves past the grace once it has
// seen the pod blocked: the grace is never waited out.

// testPodStartGrace is the tests' grace, on the manager's fake clock.
const testPodStartGrace = 10 * time.Second

// blockedManager starts a Job manager in fresh namespaces, its Jobs shaped
// by change, its reconcilers reading the returned fake clock (stopped at a
// whole second, as status timestamps keep them), and returns the manager's
// namespace.
func blockedManager(t *testing.T, prefix string, grace time.Duration, change func(*operator.Options)) (string, *clocktesting.FakePassiveClock) {
	t.Helper()
	ns, workers := uniqueName(prefix), uniqueName(prefix+"-workers")
	for _, n := range []string{ns, workers} {
		create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}})
	}
	create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: workers, Name: workerSA}})
	opts := jobOptions(ns, workers)
	opts.PodStartGrace = grace
	clk := clocktesting.NewFakePassiveClock(time.Now().Truncate(time.Second))
	opts.Clock = clk
	change(&opts)
	t.Cleanup(startManager(t, opts))
	return ns, clk
}

// smallList creates a one-shard list in ns and returns its name.
func smallList(t *testing.T, ns, prefix string) string {
	t.Helper()
	name := uniqueName(prefix)
	create(t, builders.MakeEmailList(ns, name).APIUpload(putUpload(t, []byte("email\nann@example.com\nbob@example.org\n")), testTenant).Header().Obj())
	return name
}

// blockedCase is what a list (or Dataset) whose pod cannot start must show.
type blockedCase struct {
	reasons []string // the kubelet's or scheduler's reasons that may show
	message []string // parts of the pod's message
}

func (c blockedCase) matches(cond *metav1.Condition) bool {
	if cond == nil || cond.Status != metav1.ConditionTrue || !slices.Contains(c.reasons, cond.Reason) {
		return false
	}
	for _, m := range c.message {
		if !strings.Contains(cond.Message, m) {
			return false
		}
	}
	return true
}

// status reads the conditions and phase of a list or Dataset.
type status func() (phase string, conds []metav1.Condition, generation int64)

func listStatus(t *testing.T, ns, name string) status {
	return func() (string, []metav1.Condition, int64) {
		l := getList(t, ns, name)
		return string(l.Status.Phase), l.Status.Conditions, l.Generation
	}
}

func datasetStatus(t *testing.T, ns, name string) status {
	return func() (string, []metav1.Condition, int64) {
		ds := getDataset(t, ns, name)
		return string(ds.Status.Phase), ds.Status.Conditions, ds.Generation
	}
}

// requireBlockedThenFailed: while it still runs, the object shows the
// PodsBlocked condition with the pod's reason and message (and Ready says
// the same) and a Warning event; once the grace has passed on the
// manager's clock since the condition appeared, it fails (Stalled,
// Ready=False) with that reason, saying it did not start within the grace.
func requireBlockedThenFailed(t *testing.T, ns, name string, st status, want blockedCase, clk *clocktesting.FakePassiveClock, grace time.Duration) {
	t.Helper()
	var blocked *metav1.Condition
	eventually(t, 60*time.Second, "the PodsBlocked condition while running", func() (bool, string) {
		phase, conds, gen := st()
		if phase == string(listsv1.PhaseFailed) {
			t.Fatalf("failed before PodsBlocked was seen: %s", fmtConds(conds))
		}
		blocked = condition(conds, listsv1.ConditionPodsBlocked)
		ready := condition(conds, listsv1.ConditionReady)
		ok := want.matches(blocked) && blocked.ObservedGeneration == gen &&
			ready != nil && ready.Status == metav1.ConditionFalse && ready.Reason == blocked.Reason && ready.Message == blocked.Message
		return ok, fmt.Sprintf("phase %q %s", phase, fmtConds(conds))
	})
	if !strings.Contains(blocked.Message, "the run fails unless it starts by") {
		t.Errorf("PodsBlocked message %q does not say the pod cannot start and when the run fails", blocked.Message)
	}
	eventually(t, 10*time.Second, "a Warning event with the pod's reason", func() (bool, string) {
		evs := warningEvents(t, ns, name)
		for _, e := range evs {
			r, note, _ := strings.Cut(e, ": ")
			if slices.Contains(want.reasons, r) && strings.Contains(note, "the run fails unless it starts by") {
				return true, ""
			}
		}
		return false, fmt.Sprint(evs)
	})

	// The clock has not moved since the condition appeared: the run
	// cannot have failed yet. Now the grace passes.
	if !clk.Now().Equal(blocked.LastTransitionTime.Time) {
		t.Fatalf("PodsBlocked appeared at %s, the manager's clock says %s", blocked.LastTransitionTime.Time, clk.Now())
	}
	if phase, conds, _ := st(); phase == string(listsv1.PhaseFailed) {
		t.Fatalf("failed before the grace passed on the manager's clock: %s", fmtConds(conds))
	}
	clk.SetTime(blocked.LastTransitionTime.Add(grace))
	var stalled *metav1.Condition
	eventually(t, 30*time.Second, "the failure", func() (bool, string) {
		phase, conds, _ := st()
		stalled = condition(conds, listsv1.ConditionStalled)
		return phase == string(listsv1.PhaseFailed), fmt.Sprintf("phase %q %s", phase, fmtConds(conds))
	})
	_, conds, _ := st()
	ready := condition(conds, listsv1.ConditionReady)
	if stalled == nil || stalled.Status != metav1.ConditionTrue || !slices.Contains(want.reasons, stalled.Reason) ||
		!strings.Contains(stalled.Message, " within "+grace.String()+": ") ||
		ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != stalled.Reason {
		t.Fatalf("failed with %s; want Stalled=True and Ready=False, reason one of %v, saying it did not start within %s",
			fmtConds(conds), want.reasons, grace)
	}
	for _, m := range want.message {
		if !strings.Contains(stalled.Message, m) {
			t.Errorf("Stalled message %q lacks %q", stalled.Message, m)
		}
	}
	t.Logf("%s failed: %s: %s", name, stalled.Reason, stalled.Message)
	if c := condition(conds, listsv1.ConditionPodsBlocked); c == nil || c.Message != stalled.Message {
		t.Errorf("PodsBlocked after the failure: %+v, want it to say what Stalled says", c)
	}
	// Not before the grace (checked above, before the clock passed it),
	// and dated by the manager's clock, exactly when the grace ended.
	if failedAt := blocked.LastTransitionTime.Add(grace); !stalled.LastTransitionTime.Time.Equal(failedAt) {
		t.Errorf("Stalled dated %s, want the manager's clock at the end of the grace, %s", stalled.LastTransitionTime.Time, failedAt)
	}
}

// requireJobGone: the failed run's Job is deleted, and its pods with it.
func requireJobGone(t *testing.T, ns, name string) {
	t.Helper()
	ctx := context.Background()
	eventually(t, 60*time.Second, "the Job and its pods to go", func() (bool, string) {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &batchv1.Job{})
		var pods corev1.PodList
		if lerr := k8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{batchv1.JobNameLabel: name}); lerr != nil {
			t.Fatal(lerr)
		}
		return apierrors.IsNotFound(err) && len(pods.Items) == 0, fmt.Sprintf("job: %v, %d pods", err, len(pods.Items))
	})
}

// An image the node does not know: ErrImagePull, then ImagePullBackOff.
// The list and a Dataset import both show it, then fail.
func TestPodStartUnknownImage(t *testing.T) {
	t.Parallel() // its own manager and namespaces
	var workers string
	ns, clk := blockedManager(t, "noimage", testPodStartGrace, func(o *operator.Options) {
		o.Job.Image = "registry.example/emaildata:not-on-this-node"
		workers = o.Job.Namespace
		if o.PeopleURL == "" { // the import never starts: any store will do
			o.PeopleURL = "postgres://127.0.0.1:1/never-opened"
		}
	})
	want := blockedCase{reasons: []string{"ErrImagePull", "ImagePullBackOff"},
		message: []string{`"registry.example/emaildata:not-on-this-node"`, "container worker:"}}

	name := smallList(t, ns, "noimage")
	requireBlockedThenFailed(t, ns, name, listStatus(t, ns, name), want, clk, testPodStartGrace)
	requireJobGone(t, workers, controllers.JobName(getList(t, ns, name)))

	dsName := uniqueName("noimage-ds")
	data, _ := peopleCSV(dsName, false)
	createConfigMap(t, ns, dsName, "people.csv", data)
	create(t, builders.MakeDataset(ns, dsName).ConfigMap(dsName, "people.csv").ContinueOnError(false).Obj())
	requireBlockedThenFailed(t, ns, dsName, datasetStatus(t, ns, dsName), want, clk, testPodStartGrace)
	requireJobGone(t, ns, controllers.DatasetJobName(getDataset(t, ns, dsName)))
}

// An image without the worker binary: CreateContainerError with the exec
// error, as CRI-O reports it.
func TestPodStartMissingBinary(t *testing.T) {
	t.Parallel() // its own manager and namespaces
	var workers string
	ns, clk := blockedManager(t, "nobin", testPodStartGrace, func(o *operator.Options) {
		o.Job.Image = emptyImage
		workers = o.Job.Namespace
	})
	name := smallList(t, ns, "nobin")
	requireBlockedThenFailed(t, ns, name, listStatus(t, ns, name), blockedCase{
		reasons: []string{"CreateContainerError"},
		message: []string{`exec: "/worker"`, "no such file or directory", "(shard 0)"},
	}, clk, testPodStartGrace)
	requireJobGone(t, workers, controllers.JobName(getList(t, ns, name)))
}

// Requests no node has and a selector no node matches: the scheduler's
// Unschedulable, with its message.
func TestPodStartUnschedulable(t *testing.T) {
	t.Parallel() // its own manager and namespaces
	var workers string
	ns, clk := blockedManager(t, "nonode", testPodStartGrace, func(o *operator.Options) {
		o.Job.NodeSelector = map[string]string{"node.emaildata.io/pool": "nowhere"}
		workers = o.Job.Namespace
	})
	name := smallList(t, ns, "nonode")
	requireBlockedThenFailed(t, ns, name, listStatus(t, ns, name), blockedCase{
		reasons: []string{"Unschedulable"},
		message: []string{"0/", "node affinity/selector"},
	}, clk, testPodStartGrace)
	requireJobGone(t, workers, controllers.JobName(getList(t, ns, name)))
}

// A pod that starts after all (its binary arrived) clears the condition,
// and the list completes.
func TestPodStartsAfterAll(t *testing.T) {
	t.Parallel() // its own manager and namespaces
	ns, _ := blockedManager(t, "late", time.Minute, func(o *operator.Options) { o.Job.Image = lateImage })
	name := smallList(t, ns, "late")
	eventually(t, 60*time.Second, "PodsBlocked with CreateContainerError", func() (bool, string) {
		l := getList(t, ns, name)
		c := condition(l.Status.Conditions, listsv1.ConditionPodsBlocked)
		return c != nil && c.Reason == "CreateContainerError", fmtConds(l.Status.Conditions)
	})
	// The binary arrives whole (renamed into place), as a pulled image would.
	data, err := os.ReadFile(workerBin)
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(lateImageDir, ".worker.tmp")
	if err := os.WriteFile(tmp, data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(lateImageDir, "worker")); err != nil {
		t.Fatal(err)
	}
	l := waitPhase(t, ns, name, listsv1.PhaseResults)
	if c := condition(l.Status.Conditions, listsv1.ConditionPodsBlocked); c != nil {
		t.Errorf("PodsBlocked stayed after the pod started: %+v", c)
	}
	if l.Status.Result == nil || l.Status.Result.Rows != 2 {
		t.Errorf("result %+v, want 2 rows", l.Status.Result)
	}
	eventually(t, 10*time.Second, "the PodsStarted event", func() (bool, string) {
		var evs eventsv1.EventList
		if err := k8s.List(context.Background(), &evs, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		var seen []string
		for _, e := range evs.Items {
			if e.Regarding.Name == name {
				seen = append(seen, e.Type+" "+e.Reason)
				if e.Type == corev1.EventTypeNormal && e.Reason == "PodsStarted" {
					return true, ""
				}
			}
		}
		return false, fmt.Sprint(seen)
	})
}

// Pods the Job controller cannot create (here a ResourceQuota of the
// workers' namespace allows none) leave the Job without any pod: the list
// says so with the Job controller's own message, then fails.
func TestPodStartNoPodCreated(t *testing.T) {
	t.Parallel() // its own manager and namespaces
	ctx := context.Background()
	var workers string
	ns, clk := blockedManager(t, "quota", testPodStartGrace, func(o *operator.Options) { workers = o.Job.Namespace })
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: workers, Name: "no-pods"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}}
	create(t, quota)
	// The quota controller is not among the plane's: its status is set as
	// that controller would.
	quota.Status = corev1.ResourceQuotaStatus{Hard: quota.Spec.Hard, Used: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}
	if err := k8s.Status().Update(ctx, quota); err != nil {
		t.Fatal(err)
	}
	name := smallList(t, ns, "quota")
	// A Job without a pod counts as blocked once it is old enough on the
	// manager's clock.
	job := listJob(t, workers, getList(t, ns, name))
	clk.SetTime(job.CreationTimestamp.Add(controllers.NoPodsAfter))
	requireBlockedThenFailed(t, ns, name, listStatus(t, ns, name), blockedCase{
		reasons: []string{controllers.ReasonPodsNotCreated},
		message: []string{"no worker pod", "exceeded quota: no-pods"},
	}, clk, testPodStartGrace)
}
