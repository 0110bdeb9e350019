package pipeline

import (
	"context"

	"github.com/emaildata/emaildata/internal/blobstore"
)

// FinishedSummaries reads the summaries of the shards that finished
// without error, skipping shards that failed or never wrote one (a failed
// list's failed indexes). For metrics: the manager adds them up once.
func FinishedSummaries(ctx context.Context, store *blobstore.Store, keys blobstore.ListKeys, plan *Plan) ([]Summary, error) {
	var out []Summary
	for i := range plan.Shards {
		var s Summary
		err := store.ReadJSON(ctx, keys.Summary(i), maxSummaryBytes, &s)
		if blobstore.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if s.Error == "" {
			out = append(out, s)
		}
	}
	return out, nil
}
