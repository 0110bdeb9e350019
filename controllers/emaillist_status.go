package controllers

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
)

// Condition reasons.
const (
	ReasonPreparing          = "Preparing"
	ReasonWaitingForSource   = "WaitingForSource"
	ReasonProcessing         = "Processing"
	ReasonProcessed          = "Processed"
	ReasonResults            = "Results"
	ReasonInvalidInput       = "InvalidInput"
	ReasonSourceMissing      = "SourceMissing"
	ReasonServiceUnavailable = "ServiceUnavailable"
	ReasonProcessingFailed   = "ProcessingFailed"
	// ReasonStartFailed: the executor could not start the shards (for the
	// Job executor, the Job could not be created); retried with backoff.
	ReasonStartFailed = "StartFailed"
)

// setProgressing marks a list as being worked on (kstatus InProgress).
func setProgressing(list *listsv1.EmailList, reason, msg string) {
	markProgressing(&list.Status.Conditions, list.Generation, reason, msg)
}

// setDone marks a list as finished (kstatus Current).
func setDone(list *listsv1.EmailList, reason, msg string) {
	markReady(&list.Status.Conditions, list.Generation, reason, msg)
}

// setFailed marks a list as failed for good (kstatus Failed).
func setFailed(list *listsv1.EmailList, reason, msg string) {
	list.Status.Phase = listsv1.PhaseFailed
	markStalled(&list.Status.Conditions, list.Generation, reason, msg)
}

func setProgress(list *listsv1.EmailList, done, total int64) {
	list.Status.Progress = &listsv1.Progress{Done: done, Total: total}
	list.Status.ProgressText = fmt.Sprintf("%d/%d", done, total)
}

// patchStatus writes status only when it changed, with optimistic locking so
// a concurrent writer's change is never overwritten silently.
func patchStatus(ctx context.Context, c client.Client, orig, list *listsv1.EmailList) error {
	list.Status.ObservedGeneration = list.Generation
	if equality.Semantic.DeepEqual(orig.Status, list.Status) {
		return nil
	}
	patch := client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})
	if err := c.Status().Patch(ctx, list, patch); err != nil {
		return fmt.Errorf("patch status: %w", err)
	}
	return nil
}

func isTerminal(p listsv1.Phase) bool {
	return p == listsv1.PhaseProcessed || p == listsv1.PhaseResults || p == listsv1.PhaseFailed
}
