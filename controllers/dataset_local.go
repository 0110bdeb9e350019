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
	"github.com/emaildata/emaildata/internal/refdata/people"
)

// LocalDatasetLoader imports Datasets in-process, for the local executor
// mode. Runs do not survive a restart; a Dataset found Loading with no run
// is loaded again (upserts make that harmless).
type LocalDatasetLoader struct {
	Store  *blobstore.Store
	People people.Store

	mu     sync.Mutex
	runs   map[types.UID]*localRun
	events chan event.GenericEvent
	ctx    context.Context
}

var _ DatasetLoader = (*LocalDatasetLoader)(nil)

// NewLocalDatasetLoader returns a loader into ps; ctx bounds every run.
func NewLocalDatasetLoader(ctx context.Context, store *blobstore.Store, ps people.Store) *LocalDatasetLoader {
	return &LocalDatasetLoader{Store: store, People: ps, runs: map[types.UID]*localRun{},
		events: make(chan event.GenericEvent, 256), ctx: ctx}
}

// Events delivers a Dataset when its run ends, so the controller looks again.
func (l *LocalDatasetLoader) Events() <-chan event.GenericEvent { return l.events }

// Start runs the import in a goroutine, once.
func (l *LocalDatasetLoader) Start(_ context.Context, ds *listsv1.Dataset, key string) error {
	if l.People == nil {
		return errPeopleUnavailable
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.runs[ds.UID]; ok {
		return nil
	}
	run := &localRun{}
	l.runs[ds.UID] = run
	notify := ds.DeepCopy()
	opt := people.ImportOptions{ContinueOnError: ds.Spec.ContinuesOnError(), MaxErrors: int(ds.Spec.MaxErrors)}
	summaryKey := blobstore.DatasetKeys{UID: string(ds.UID)}.Summary()
	go func() {
		err := l.load(key, summaryKey, opt)
		if err != nil && l.ctx.Err() == nil {
			logf.FromContext(l.ctx).Error(err, "dataset import failed", "dataset", ds.Name)
		}
		l.mu.Lock()
		run.done, run.err, run.msg = true, err, l.Store.Redact(err)
		l.mu.Unlock()
		select {
		case l.events <- event.GenericEvent{Object: notify}:
		case <-l.ctx.Done():
		}
	}()
	return nil
}

// load imports key and writes the summary; its error is the import's.
func (l *LocalDatasetLoader) load(key, summaryKey string, opt people.ImportOptions) error {
	ctx := l.ctx
	r, err := l.Store.NewReader(ctx, key, nil)
	if err != nil {
		return fmt.Errorf("open %s: %w", key, err)
	}
	res, ierr := people.Import(ctx, l.People, r, opt)
	_ = r.Close()
	if err := l.Store.WriteJSON(ctx, summaryKey, people.Summarize(res, ierr)); err != nil {
		return fmt.Errorf("write summary: %w", err)
	}
	return ierr
}

// Observe reports the run's state.
func (l *LocalDatasetLoader) Observe(_ context.Context, ds *listsv1.Dataset) (Execution, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.runs[ds.UID].execution(), nil
}

// Release does nothing: a finished run is kept until Forget, so that a
// stale read of the Dataset never starts it again.
func (l *LocalDatasetLoader) Release(context.Context, *listsv1.Dataset) error { return nil }

// Forget drops the run of a deleted Dataset.
func (l *LocalDatasetLoader) Forget(ds *listsv1.Dataset) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.runs, ds.UID)
}
