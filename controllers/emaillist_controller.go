// Package controllers reconciles EmailList and Purchase resources.
package controllers

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/lists/listid"
	"github.com/emaildata/emaildata/internal/lists/listservice"
	"github.com/emaildata/emaildata/internal/lists/pipeline"
)

// Finalizer deletes a list's blobs before the list goes away.
const Finalizer = "lists.emaildata.io/blobs"

// EmailListReconciler moves an EmailList through Pending, Processing and
// Processed or Results (or Failed).
type EmailListReconciler struct {
	Client client.Client
	// APIReader reads objects the manager does not cache (source ConfigMaps).
	APIReader client.Reader
	Scheme    *runtime.Scheme
	Recorder  events.EventRecorder
	Store     *blobstore.Store
	Registry  *listservice.Registry
	Executor  Executor
	IDs       *listid.Allocator
	Pipeline  pipeline.Config
	// SourceGrace is how long a missing source is waited for (GitOps tools
	// may apply the list before its ConfigMap) before the list fails.
	SourceGrace time.Duration
	// PollInterval is how often progress is refreshed while processing.
	PollInterval time.Duration
	// PodStartGrace is how long a worker pod may be unable to start (see
	// BlockedPod) before the list fails; DefaultPodStartGrace when zero.
	PodStartGrace time.Duration
	Callbacks     CallbackConfig
	// Access says which sources a list may read.
	Access SourceAccess
	// KeepParts keeps the shards' intermediate objects after the merge
	// (for debugging); by default they are deleted once the outcome is saved.
	KeepParts bool
	// Clock tells the time; nil is the wall clock.
	Clock clock.PassiveClock
	// FleetHealth, when set, says whether the fleet backend answers (the
	// manager's own view of it); running email_validation lists say so in
	// their FleetBackend condition.
	FleetHealth func() (up bool, detail string)

	// releases batches the release of list ID reservations.
	releases listid.Releaser
}

// Reconcile loads the list, computes its status from the world, acts, and
// writes status back only when it changed.
func (r *EmailListReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var list listsv1.EmailList
	if err := r.Client.Get(ctx, req.NamespacedName, &list); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !list.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, &list)
	}
	if err := addFinalizer(ctx, r.Client, &list, Finalizer); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}

	orig := list.DeepCopy()
	res, err := r.reconcileStatus(ctx, orig, &list)
	return finishStatus(ctx, r.Client, orig, &list, emailListStatus, res, err,
		func() { r.recordFinished(ctx, orig, &list) },
		func() { r.releaseReservation(ctx, orig, &list) })
}

func (r *EmailListReconciler) reconcileStatus(ctx context.Context, orig, list *listsv1.EmailList) (ctrl.Result, error) {
	if list.Status.ListID == 0 {
		id, err := r.listID(ctx, list)
		if errors.Is(err, listid.ErrKeyMissing) {
			// A new installation before its manager made the key, or an
			// installer's own key not provided yet: say so, look again.
			r.setProgressing(list, ReasonWaitingForInstallation, "no list ID can be assigned yet: "+err.Error())
			return ctrl.Result{RequeueAfter: r.PollInterval}, nil
		}
		if err != nil {
			return ctrl.Result{}, err
		}
		list.Status.ListID = id
	}
	if r.sourceAppeared(ctx, list) {
		list.Status.Phase = ""
		emit(r.Recorder, list, corev1.EventTypeNormal, "SourceFound", "the source appeared; preparing the list again")
	}
	if list.Status.Phase == "" {
		list.Status.Phase = listsv1.PhasePending
		r.setProgressing(list, ReasonPreparing, "the list is queued for preparation")
		emit(r.Recorder, list, corev1.EventTypeNormal, "Accepted", "list %d accepted", list.Status.ListID)
	}

	switch list.Status.Phase {
	case listsv1.PhasePending:
		return r.reconcilePending(ctx, list)
	case listsv1.PhaseProcessing:
		return r.reconcileProcessing(ctx, list)
	case listsv1.PhaseProcessed:
		if err := r.reconcilePurchase(ctx, list); err != nil {
			return ctrl.Result{}, err
		}
	}
	// Terminal phases. Anything below acts on an outcome that is already
	// stored (orig came from the API server), never on one still in memory.
	if !isTerminal(orig.Status.Phase) {
		return ctrl.Result{Requeue: true}, nil
	}
	if err := r.Executor.Release(ctx, list); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.dropParts(ctx, list); err != nil {
		return ctrl.Result{}, err
	}
	return r.reconcileCallback(ctx, orig, list)
}

// listID gives the list its ID: the one the REST API reserved for it and
// put in its label, or a new one from the counter. A label is honoured only
// on a list the API created (its namespace and its managed-by label) and
// only while the counter holds a reservation of that ID for that very list
// (internal/lists/listid); any other label is ignored, with a Warning event, so
// no namespace chooses its ID and no two lists share one.
func (r *EmailListReconciler) listID(ctx context.Context, list *listsv1.EmailList) (int64, error) {
	v, labelled := list.Labels[listsv1.ListIDLabel]
	why := ""
	if labelled {
		id, refused, err := r.reservedID(ctx, list, v)
		if err != nil || refused == "" {
			return id, err
		}
		// The cache may be behind a status this reconciler wrote (and a
		// reservation it released since): ask the API server first.
		var live listsv1.EmailList
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(list), &live); err == nil && live.Status.ListID != 0 {
			return live.Status.ListID, nil
		}
		why = refused
	}
	id, err := r.IDs.Next(ctx)
	if err != nil {
		return 0, fmt.Errorf("allocate list id: %w", err)
	}
	if why != "" {
		emit(r.Recorder, list, corev1.EventTypeWarning, ReasonListIDLabelIgnored, "label %s=%q ignored: %s; the operator assigned list ID %d",
			listsv1.ListIDLabel, v, why, id)
	}
	return id, nil
}

// ReasonListIDLabelIgnored: the event of a list-id label the controller
// did not honour.
const ReasonListIDLabelIgnored = "ListIDLabelIgnored"

// reservedID returns the labelled ID when the REST API reserved it for
// this list; else why the label is not honoured.
func (r *EmailListReconciler) reservedID(ctx context.Context, list *listsv1.EmailList, v string) (int64, string, error) {
	if list.Namespace != r.Access.APINamespace || list.Labels[listsv1.LabelManagedBy] != listsv1.ManagedByAPI {
		return 0, fmt.Sprintf("list IDs are assigned by the operator; the label is honoured only on lists the REST API creates in namespace %q", r.Access.APINamespace), nil
	}
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id <= 0 {
		return 0, "not a list ID (a positive whole number)", nil
	}
	res, ok, err := r.IDs.Reserved(ctx, id)
	if err != nil {
		return 0, "", err
	}
	if !ok || res.Name != list.Name {
		return 0, fmt.Sprintf("list ID %d was not handed out to this list by the REST API (it is taken, not handed out yet, or another list's)", id), nil
	}
	return id, "", nil
}

// dropReservation releases, as the list goes, a reservation that still
// names it (a release that failed, or has not been written yet), so that a
// list made again under its name cannot adopt its ID.
func (r *EmailListReconciler) dropReservation(ctx context.Context, list *listsv1.EmailList) error {
	id := list.Status.ListID
	if id == 0 || list.Namespace != r.Access.APINamespace || list.Labels[listsv1.ListIDLabel] != strconv.FormatInt(id, 10) {
		return nil
	}
	res, ok, err := r.IDs.Reserved(ctx, id)
	if err != nil || !ok || res.Name != list.Name {
		return err
	}
	return r.IDs.Release(ctx, id, list.Name, nil)
}

// reservationGrace is how long a reservation waits for its list before a
// later release drops it (the API stopped between reserving and creating).
const reservationGrace = time.Hour

// releaseReservation drops the reservation of the ID the list adopted from
// its label, once its status holding the ID is stored; stale reservations
// go with it. A failure only leaves the reservation for a later release
// to drop as stale: the list's ID is already stored.
func (r *EmailListReconciler) releaseReservation(ctx context.Context, orig, list *listsv1.EmailList) {
	if orig.Status.ListID != 0 || list.Status.ListID == 0 || list.Namespace != r.Access.APINamespace ||
		list.Labels[listsv1.ListIDLabel] != strconv.FormatInt(list.Status.ListID, 10) {
		return
	}
	now := clockNow(r.Clock)
	stale := func(res listid.Reservation) bool {
		if now.Sub(res.At) < reservationGrace {
			return false
		}
		var l listsv1.EmailList
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: r.Access.APINamespace, Name: res.Name}, &l)
		return apierrors.IsNotFound(err) || err == nil && l.Status.ListID != 0
	}
	if err := r.releases.Release(ctx, r.IDs, list.Status.ListID, list.Name, stale); err != nil {
		logf.FromContext(ctx).Error(err, "release list id reservation", "listID", list.Status.ListID)
	}
}

func (r *EmailListReconciler) reconcilePending(ctx context.Context, list *listsv1.EmailList) (ctrl.Result, error) {
	if list.Status.Shards == 0 {
		res, done, err := r.prepare(ctx, list)
		if !done || err != nil {
			return res, err
		}
	}
	if err := r.start(ctx, list); err != nil {
		if waitingForBudget(err) {
			return ctrl.Result{RequeueAfter: r.PollInterval}, nil
		}
		return ctrl.Result{}, err
	}
	now := metav1.NewTime(clockNow(r.Clock))
	list.Status.Phase = listsv1.PhaseProcessing
	list.Status.StartedAt = &now
	r.setProgressing(list, ReasonProcessing, processingMessage(list))
	emit(r.Recorder, list, corev1.EventTypeNormal, "Processing", "%s", processingMessage(list))
	return ctrl.Result{RequeueAfter: r.PollInterval}, nil
}

func processingMessage(list *listsv1.EmailList) string {
	return fmt.Sprintf("processing %d rows in %d shards", list.Status.Records, list.Status.Shards)
}

// watchStart keeps the PodsBlocked condition (and Ready's reason) in step
// with the run's pods, and fails the list once a pod has been unable to
// start for PodStartGrace. It reports whether the list failed.
func (r *EmailListReconciler) watchStart(list *listsv1.EmailList, b *BlockedPod) bool {
	w := trackBlocked(&list.Status.Conditions, list.Generation, b, clockNow(r.Clock), podStartGrace(r.PodStartGrace))
	switch {
	case w.Expired:
		r.fail(list, b.Reason, w.Message)
		return true
	case w.Cleared:
		r.setProgressing(list, ReasonProcessing, processingMessage(list))
		emit(r.Recorder, list, corev1.EventTypeNormal, "PodsStarted", "the worker pods started after all")
	case b != nil:
		r.setProgressing(list, b.Reason, w.Message)
		if w.Warn {
			emit(r.Recorder, list, corev1.EventTypeWarning, b.Reason, "%s", w.Message)
		}
	}
	return false
}

// start starts the shards; when it cannot (a Job the API server refuses,
// say), the list says why while the controller retries with backoff.
func (r *EmailListReconciler) start(ctx context.Context, list *listsv1.EmailList) error {
	err := r.Executor.Start(ctx, list, int(list.Status.Shards))
	if waitingForBudget(err) {
		r.setProgressing(list, ReasonWaitingForSMTPBudget, err.Error())
		return err
	}
	if err != nil {
		msg := fmt.Sprintf("the shards cannot start (retrying): %v", err)
		r.setProgressing(list, ReasonStartFailed, msg)
		emit(r.Recorder, list, corev1.EventTypeWarning, ReasonStartFailed, "%s", msg)
	}
	return err
}

// Reasons of the FleetBackend condition.
const (
	ReasonFleetReachable   = "Reachable"
	ReasonFleetUnreachable = "Unreachable"
)

// noteFleet keeps a running email_validation list's FleetBackend
// condition in step with the backend.
func (r *EmailListReconciler) noteFleet(list *listsv1.EmailList) {
	if r.FleetHealth == nil || list.Spec.Service != listsv1.ServiceEmailValidation {
		return
	}
	up, detail := r.FleetHealth()
	c := metav1.Condition{Type: listsv1.ConditionFleetBackend, Status: metav1.ConditionTrue, Reason: ReasonFleetReachable,
		Message: "the fleet backend answers", ObservedGeneration: list.Generation}
	if !up {
		c.Status, c.Reason = metav1.ConditionFalse, ReasonFleetUnreachable
		c.Message = "the fleet backend does not answer (" + detail + "): pods keep to their divided share of each mail host's budget, never more, and verify without the history until it answers; nothing is lost"
	}
	r.conds(list).set(c.Type, c.Status, c.Reason, c.Message)
}

// waitingForBudget: the list waits for its part of the SMTP budget; no
// error, no warning, a poll.
func waitingForBudget(err error) bool {
	var w *BudgetWaitError
	return errors.As(err, &w)
}

func (r *EmailListReconciler) reconcileProcessing(ctx context.Context, list *listsv1.EmailList) (ctrl.Result, error) {
	keys := blobstore.ListKeys{UID: string(list.UID)}
	exec, err := r.Executor.Observe(ctx, list)
	if err != nil {
		return ctrl.Result{}, err
	}
	switch exec.State {
	case ExecNotStarted:
		// Lost (a restarted local executor, or a deleted Job): run again;
		// shards rewrite the same objects, so this is safe.
		if err := r.start(ctx, list); err != nil && !waitingForBudget(err) {
			return ctrl.Result{}, err
		}
		return ctrl.Result{RequeueAfter: r.PollInterval}, nil
	case ExecRunning:
		if r.watchStart(list, exec.Blocked) {
			return ctrl.Result{}, nil
		}
		plan, err := pipeline.LoadPlan(ctx, r.Store, keys)
		if err != nil {
			return ctrl.Result{}, err
		}
		done, err := pipeline.Progress(ctx, r.Store, keys, plan)
		if err != nil {
			return ctrl.Result{}, err
		}
		setProgress(list, done, list.Status.Records)
		r.noteFleet(list)
		return ctrl.Result{RequeueAfter: r.PollInterval}, nil
	case ExecFailed:
		if exec.Reason != "" {
			r.fail(list, exec.Reason, exec.Message)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, r.failFromShards(ctx, list, keys, exec.Message)
	}
	return r.complete(ctx, list, keys)
}

// failFromShards fails the list with the most precise reason available: a
// shard's own summary names the row and problem, the Job only its exit.
func (r *EmailListReconciler) failFromShards(ctx context.Context, list *listsv1.EmailList, keys blobstore.ListKeys, fallback string) error {
	reason, msg := ReasonProcessingFailed, fallback
	if plan, err := pipeline.LoadPlan(ctx, r.Store, keys); err == nil {
		if s, err := pipeline.ShardFailure(ctx, r.Store, keys, plan); err == nil && s != nil {
			msg = fmt.Sprintf("shard %d: %s", s.Index, s.Error)
			if s.BadInput {
				reason = ReasonInvalidInput
			}
		}
	}
	r.fail(list, reason, msg)
	return nil
}

func (r *EmailListReconciler) complete(ctx context.Context, list *listsv1.EmailList, keys blobstore.ListKeys) (ctrl.Result, error) {
	plan, err := pipeline.LoadPlan(ctx, r.Store, keys)
	if err != nil {
		return ctrl.Result{}, err
	}
	out, err := pipeline.Merge(ctx, r.Store, keys, plan, pipeline.ResultFileName(list.Spec.Format.Name, list.Status.ListID))
	if err != nil {
		return ctrl.Result{}, err
	}
	now := metav1.NewTime(clockNow(r.Clock))
	list.Status.CompletedAt = &now
	list.Status.Result = &listsv1.ResultFile{Key: out.Key, Bytes: out.Bytes, Rows: out.Rows, SHA256: out.SHA256, FileName: out.FileName}
	list.Status.Reporting = out.Reporting
	list.Status.Pacing = pacing(out.Pace)
	setProgress(list, out.Rows, list.Status.Records)
	if list.Spec.EffectiveAction() == listsv1.ActionReport {
		list.Status.Phase = listsv1.PhaseProcessed
		r.setDone(list, ReasonProcessed, "processed; results are held until purchased")
		emit(r.Recorder, list, corev1.EventTypeNormal, "Processed", "processed %d rows; results are held until purchased", out.Rows)
		// A Purchase may already be waiting.
		return ctrl.Result{}, r.reconcilePurchase(ctx, list)
	}
	list.Status.Phase = listsv1.PhaseResults
	list.Status.Purchased = true
	r.setDone(list, ReasonResults, "processed; results are ready to download")
	emit(r.Recorder, list, corev1.EventTypeNormal, "Results", "processed %d rows; results are ready", out.Rows)
	return ctrl.Result{}, nil
}

// reconcilePurchase moves a Processed list to Results once a valid Purchase
// for it exists (an invalid one says why in its own status).
func (r *EmailListReconciler) reconcilePurchase(ctx context.Context, list *listsv1.EmailList) error {
	var purchases listsv1.PurchaseList
	if err := r.Client.List(ctx, &purchases, client.InNamespace(list.Namespace), client.MatchingFields{PurchaseListNameField: list.Name}); err != nil {
		return fmt.Errorf("list purchases: %w", err)
	}
	for _, p := range purchases.Items {
		if !p.DeletionTimestamp.IsZero() {
			continue
		}
		ok, err := r.deliver(ctx, list, &p)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		list.Status.Phase = listsv1.PhaseResults
		list.Status.Purchased = true
		list.Status.Delivery = &listsv1.DeliveryStatus{Purchase: p.Name, Fields: p.Spec.Fields, MatchType: p.Spec.MatchType}
		r.setDone(list, ReasonResults, fmt.Sprintf("purchased by %s; results are ready to download", p.Name))
		emit(r.Recorder, list, corev1.EventTypeNormal, "Purchased", "purchased by %s", p.Name)
		return nil
	}
	return nil
}

// deliver narrows the result file to what the purchase asked for (fields,
// match type); without options the merged result is delivered as it is.
// ok is false for a purchase whose options the list cannot deliver.
func (r *EmailListReconciler) deliver(ctx context.Context, list *listsv1.EmailList, p *listsv1.Purchase) (ok bool, err error) {
	d := purchaseDelivery(p)
	if list.Status.Result == nil {
		return true, nil
	}
	keys := blobstore.ListKeys{UID: string(list.UID)}
	plan, err := pipeline.LoadPlan(ctx, r.Store, keys)
	if err != nil {
		return false, err
	}
	if pipeline.CheckDelivery(plan.Columns, d) != nil {
		return false, nil
	}
	if d.Empty() {
		return true, nil
	}
	res := list.Status.Result
	out, err := pipeline.Restrict(ctx, r.Store, keys, plan, &pipeline.Outcome{Key: res.Key, FileName: res.FileName}, d)
	if err != nil {
		return false, fmt.Errorf("deliver purchase %s: %w", p.Name, err)
	}
	list.Status.Result = &listsv1.ResultFile{Key: out.Key, Bytes: out.Bytes, Rows: out.Rows, SHA256: out.SHA256, FileName: out.FileName}
	return true, nil
}

func purchaseDelivery(p *listsv1.Purchase) pipeline.Delivery {
	return pipeline.Delivery{Fields: p.Spec.Fields, IndividualOnly: p.Spec.MatchType == listsv1.MatchIndividual}
}

func (r *EmailListReconciler) fail(list *listsv1.EmailList, reason, msg string) {
	r.setFailed(list, reason, msg)
	emit(r.Recorder, list, corev1.EventTypeWarning, reason, "%s", msg)
}

// pacing is the status summary of what paced the list (nil: unknown).
func pacing(p *listservice.Pace) *listsv1.Pacing {
	if p == nil {
		return nil
	}
	sec := func(s float64) metav1.Duration {
		return metav1.Duration{Duration: time.Duration(s * float64(time.Second)).Round(time.Millisecond)}
	}
	return &listsv1.Pacing{Host: p.Host, Span: sec(p.SpanSeconds), Floor: sec(p.FloorSeconds), Reason: p.Reason}
}
