package controllers

import (
	"fmt"

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
	// ReasonDeadlineExceeded: the run lasted longer than the workers'
	// deadline (JobConfig.ActiveDeadline) and was stopped; lists and
	// Datasets alike.
	ReasonDeadlineExceeded = "DeadlineExceeded"
	// ReasonWaitingForInstallation: an installation secret the list needs
	// (the list ID key) does not exist yet; looked for again each poll.
	ReasonWaitingForInstallation = "WaitingForInstallation"
)

// conds sets a list's conditions, dated by the reconciler's clock.
func (r *EmailListReconciler) conds(list *listsv1.EmailList) conditions {
	return conditionsOf(&list.Status.Conditions, list.Generation, r.Clock)
}

// setProgressing marks a list as being worked on (kstatus InProgress).
func (r *EmailListReconciler) setProgressing(list *listsv1.EmailList, reason, msg string) {
	r.conds(list).progressing(reason, msg)
}

// setDone marks a list as finished (kstatus Current).
func (r *EmailListReconciler) setDone(list *listsv1.EmailList, reason, msg string) {
	r.conds(list).ready(reason, msg)
}

// setFailed marks a list as failed for good (kstatus Failed).
func (r *EmailListReconciler) setFailed(list *listsv1.EmailList, reason, msg string) {
	list.Status.Phase = listsv1.PhaseFailed
	r.conds(list).stalled(reason, msg)
}

func setProgress(list *listsv1.EmailList, done, total int64) {
	list.Status.Progress = &listsv1.Progress{Done: done, Total: total}
	list.Status.ProgressText = fmt.Sprintf("%d/%d", done, total)
}

func isTerminal(p listsv1.Phase) bool {
	return p == listsv1.PhaseProcessed || p == listsv1.PhaseResults || p == listsv1.PhaseFailed
}
