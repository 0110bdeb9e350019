package controllers

import (
	"context"
	"fmt"
	"time"

	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/platform/metrics"
)

// Defaults of the upload sweep (operator.Options, the manager's flags).
//
// DefaultOrphanUploadAge: an upload is removed once nothing has written it
// for a day. A live upload writes far more often: the REST API streams the
// body into the store as it arrives (a file store's temporary file gets a
// new modification time with every write, an S3 upload a part every
// MinPartSize bytes), and creates the list within seconds of the last
// byte (a zip's check reads it, then one ID reservation and one create).
// A day is thousands of times either; only a client that sends nothing
// for a day loses its upload, which fails then (its request, not a list).
const (
	DefaultOrphanUploadAge = 24 * time.Hour
	// DefaultUploadSweepInterval: how often the uploads folder is listed.
	DefaultUploadSweepInterval = 10 * time.Minute
)

// UploadSweeper removes the uploads an API left behind (killed mid-upload,
// or between storing the upload and creating its list): objects under the
// store's uploads folder that no EmailList names and that nothing wrote
// for MaxAge, and on S3 incomplete multipart uploads as old. It runs on the
// elected manager only.
type UploadSweeper struct {
	// Reader lists the EmailLists of Namespace from the API server (not a
	// cache: the manager may not watch the API's namespace, and a list
	// missing from a stale view would lose its upload).
	Reader client.Reader
	// Namespace is the REST API's, the only one whose lists may name an
	// upload (SourceAccess.APINamespace).
	Namespace string
	Store     *blobstore.Store
	MaxAge    time.Duration
	Interval  time.Duration
	// Clock tells the time; nil is the wall clock.
	Clock clock.PassiveClock
}

// NeedLeaderElection: one sweeper for the cluster.
func (s *UploadSweeper) NeedLeaderElection() bool { return true }

// Start sweeps at once, then every Interval, until ctx ends.
func (s *UploadSweeper) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("upload-sweeper")
	t := time.NewTicker(s.Interval)
	defer t.Stop()
	for {
		res, err := s.Sweep(ctx)
		if ctx.Err() != nil {
			return nil
		}
		outcome := metrics.SweepSucceeded
		if err != nil {
			outcome = metrics.SweepFailed
			log.Error(err, "sweep the uploads folder", "removedObjects", res.Objects, "abortedMultiparts", res.Multiparts)
		} else if res != (blobstore.SweepResult{}) {
			log.Info("removed orphaned uploads", "objects", res.Objects, "bytes", res.Bytes, "multiparts", res.Multiparts, "olderThan", s.MaxAge)
		}
		managerMetrics().UploadSweep(outcome, res.Objects, res.Multiparts, res.Bytes)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Sweep removes the orphans once. The lists are read before the store is
// listed: an upload is old only if nothing wrote it for MaxAge, and its
// list, if it has one, was created seconds after that last write, so it is
// in the view read here.
func (s *UploadSweeper) Sweep(ctx context.Context) (blobstore.SweepResult, error) {
	cutoff := clockNow(s.Clock).Add(-s.MaxAge)
	live, err := s.liveUploads(ctx)
	if err != nil {
		return blobstore.SweepResult{}, err
	}
	return s.Store.RemoveOrphanUploads(ctx, cutoff, func(key string) bool { return live[key] })
}

// liveUploads are the upload keys of the API namespace's EmailLists,
// read a page at a time.
func (s *UploadSweeper) liveUploads(ctx context.Context) (map[string]bool, error) {
	live := map[string]bool{}
	opts := []client.ListOption{client.InNamespace(s.Namespace), client.Limit(500)}
	for {
		var lists listsv1.EmailListList
		if err := s.Reader.List(ctx, &lists, opts...); err != nil {
			return nil, fmt.Errorf("list the EmailLists of %s: %w", s.Namespace, err)
		}
		for _, l := range lists.Items {
			if k := l.Spec.Source.UploadKey; k != "" {
				live[k] = true
			}
		}
		if lists.Continue == "" {
			return live, nil
		}
		opts = []client.ListOption{client.InNamespace(s.Namespace), client.Limit(500), client.Continue(lists.Continue)}
	}
}
