package controllers

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/lists/listfile"
	"github.com/emaildata/emaildata/internal/lists/listservice"
	"github.com/emaildata/emaildata/internal/lists/pipeline"
	"github.com/emaildata/emaildata/internal/platform/clock"
	"github.com/emaildata/emaildata/internal/platform/logging"
)

// LocalExecutor runs shards in-process with the worker's own code, for the
// local stack, which has no kubelet. Runs do not survive a restart; a list
// found Processing with no run is simply started again.
type LocalExecutor struct {
	Store    *blobstore.Store
	Registry *listservice.Registry
	Limits   listfile.Limits
	// Clock runs the shards' progress throttle (nil: the wall clock).
	Clock clock.Clock
	// Slots caps shards running at once across all lists.
	slots chan struct{}

	mu     sync.Mutex
	runs   map[types.UID]*localRun
	events chan event.GenericEvent
	ctx    context.Context
}

// execution reports a run's state; a nil run was never started here.
func (r *localRun) execution() Execution {
	switch {
	case r == nil:
		return Execution{State: ExecNotStarted}
	case !r.done:
		return Execution{State: ExecRunning}
	case r.err != nil:
		return Execution{State: ExecFailed, Message: r.msg}
	}
	return Execution{State: ExecSucceeded}
}

type localRun struct {
	done bool
	err  error
	// msg is err as the object's status shows it: without the server's
	// paths (redact.Error), which only the log gets.
	msg    string
	cancel context.CancelFunc
}

var (
	_ Executor = (*LocalExecutor)(nil)
	_ Stopper  = (*LocalExecutor)(nil)
)

// NewLocalExecutor returns an executor running at most concurrency shards
// at once. ctx bounds every run (the manager's context).
func NewLocalExecutor(ctx context.Context, store *blobstore.Store, reg *listservice.Registry, lim listfile.Limits, concurrency int) *LocalExecutor {
	if concurrency < 1 {
		concurrency = 1
	}
	return &LocalExecutor{
		Store: store, Registry: reg, Limits: lim,
		slots:  make(chan struct{}, concurrency),
		runs:   map[types.UID]*localRun{},
		events: make(chan event.GenericEvent, 1024),
		ctx:    ctx,
	}
}

// Events delivers a list when its run ends, so the controller looks again.
func (e *LocalExecutor) Events() <-chan event.GenericEvent { return e.events }

// Start runs the list's shards in goroutines, once.
func (e *LocalExecutor) Start(_ context.Context, list *listsv1.EmailList, shards int) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.runs[list.UID]; ok {
		return nil
	}
	ctx, cancel := context.WithCancel(e.ctx)
	run := &localRun{cancel: cancel}
	e.runs[list.UID] = run
	keys := blobstore.ListKeys{UID: string(list.UID)}
	notify := list.DeepCopy()
	go func() {
		defer cancel()
		err := e.runShards(ctx, keys, shards)
		if err != nil && ctx.Err() == nil && !pipeline.IsBadInput(err) {
			logf.FromContext(ctx).Error(err, "list run failed", "list", keys.UID)
		}
		e.mu.Lock()
		run.done, run.err, run.msg = true, err, e.Store.Redact(err)
		e.mu.Unlock()
		select {
		case e.events <- event.GenericEvent{Object: notify}:
		case <-e.ctx.Done():
		}
	}()
	return nil
}

func (e *LocalExecutor) runShards(ctx context.Context, keys blobstore.ListKeys, shards int) error {
	log := logf.FromContext(ctx).WithValues("list", keys.UID)
	var wg sync.WaitGroup
	defer wg.Wait() // a stopped run ends only when its shards have
	errs := make([]error, shards)
	for i := 0; i < shards; i++ {
		select {
		case e.slots <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		if ctx.Err() != nil { // stopped while waiting for a slot
			<-e.slots
			return ctx.Err()
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			defer func() { <-e.slots }()
			_, errs[i] = pipeline.RunShard(ctx, e.Store, keys, i, e.Registry, e.Limits, pipeline.WithClock(e.Clock))
			if errs[i] != nil {
				log.V(1).Info("shard failed", "index", i, logging.KeyError, errs[i].Error())
			}
		}(i)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return fmt.Errorf("shard %d: %w", i, err)
		}
	}
	return nil
}

// Observe reports the in-process run.
func (e *LocalExecutor) Observe(_ context.Context, list *listsv1.EmailList) (Execution, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.runs[list.UID].execution(), nil
}

// Stop cancels the list's run: no pending shard starts, running ones see
// their context end. It reports stopped only once every shard goroutine
// has returned; the run's end event brings the list back.
func (e *LocalExecutor) Stop(_ context.Context, list *listsv1.EmailList) (bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	run, ok := e.runs[list.UID]
	if !ok {
		return true, nil
	}
	if !run.done {
		run.cancel()
		return false, nil
	}
	delete(e.runs, list.UID)
	return true, nil
}

// Release forgets the finished run.
func (e *LocalExecutor) Release(_ context.Context, list *listsv1.EmailList) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if run, ok := e.runs[list.UID]; ok && run.done {
		delete(e.runs, list.UID)
	}
	return nil
}
