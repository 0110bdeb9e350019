package controllers

import (
	"context"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
)

// ExecState is where a list's shards are.
type ExecState int

const (
	// ExecNotStarted: nothing runs for the list (never started, or lost).
	ExecNotStarted ExecState = iota
	// ExecRunning: shards are running.
	ExecRunning
	// ExecSucceeded: every shard finished.
	ExecSucceeded
	// ExecFailed: a shard failed for good.
	ExecFailed
)

// Execution is an executor's view of a list's run.
type Execution struct {
	State ExecState
	// Message explains a failure.
	Message string
	// Reason, when set, is a failure's condition reason that outranks
	// what the shards' summaries say (ReasonDeadlineExceeded: the run was
	// stopped from outside, whatever its shards were doing).
	Reason string
	// Blocked is a pod of a running run that cannot start (nil when none,
	// and always for in-process runs).
	Blocked *BlockedPod
}

// Executor runs the shards of a prepared list. The Kubernetes Job executor
// is the default; the local executor runs the same worker code in-process
// where there is no kubelet.
type Executor interface {
	// Start launches the list's shards. It is idempotent.
	Start(ctx context.Context, list *listsv1.EmailList, shards int) error
	// Observe reports the state of the list's run.
	Observe(ctx context.Context, list *listsv1.EmailList) (Execution, error)
	// Release is called once the outcome is saved in status, so the run's
	// leftovers can be cleaned up.
	Release(ctx context.Context, list *listsv1.EmailList) error
}
