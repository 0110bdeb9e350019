package controllers

import (
	"context"
	"errors"
	"fmt"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/refdata/people"
)

// DatasetLoader runs the import of a Dataset whose source is in the blob
// store. The Job loader runs `worker people-import` in a batch/v1 Job; the
// local loader calls people.Import in-process. Both leave a DatasetSummary
// at DatasetKeys.Summary() when the import ends, however it ends.
type DatasetLoader interface {
	// Start launches the import of the object key. It is idempotent.
	Start(ctx context.Context, ds *listsv1.Dataset, key string) error
	// Observe reports the state of the import.
	Observe(ctx context.Context, ds *listsv1.Dataset) (Execution, error)
	// Release is called once the outcome is saved in status.
	Release(ctx context.Context, ds *listsv1.Dataset) error
}

// errPeopleUnavailable: the operator has no people store to load into.
var errPeopleUnavailable = errors.New("no reference people store is configured (--people-url)")

// The outcome of one import is a people.ImportSummary, stored as JSON at
// datasets/<uid>/summary.json (blobstore.DatasetKeys.Summary).
//
// Contract with the worker: `worker people-import --blob-url URL --key KEY
// --summary-key datasets/<uid>/summary.json --people-url URL
// [--continue-on-error] [--max-errors N]` writes this object to
// --summary-key (and may print the same JSON to stdout) before it exits,
// whether the import succeeded or not, for example
//
//	{"rows":4,"imported":3,"failed":1,"errors":["line 7: email: invalid email address"]}
//	{"rows":2,"imported":1,"failed":1,"errors":["line 3: 3 fields, the header has 4"],
//	 "error":"people: import: line 3: 3 fields, the header has 4"}
//
// rows, imported and failed are people.ImportResult's counts; errors holds
// the RowError messages (line and column, never row contents), at most
// people.MaxSummaryErrors of them and a "... and N more"; error is set when the import stopped
// (the error people.Import returned) and is absent on success. The worker
// exits 0 on success, ExitBadInput (42) when the input is at fault (a bad
// header, a malformed row without --continue-on-error, too many malformed
// rows) so that the Job fails at once, and any other code for problems
// worth one retry (the store).

// maxSummaryBytes bounds the summary read back from the store.
const maxSummaryBytes = 256 << 10

// maxErrorLen bounds one error message in status.
const maxErrorLen = 512

func readSummary(ctx context.Context, store *blobstore.Store, ds *listsv1.Dataset) (*people.ImportSummary, error) {
	var s people.ImportSummary
	err := store.ReadJSON(ctx, blobstore.DatasetKeys{UID: string(ds.UID)}.Summary(), maxSummaryBytes, &s)
	if blobstore.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read dataset summary: %w", err)
	}
	return &s, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
