package pipeline

import (
	"context"

	"github.com/emaildata/emaildata/internal/lists/blobstore"
)

// FinishedSummaries reads the summaries of the shards that finished
// without error, skipping shards that failed or never wrote one (a failed
// list's failed indexes). For metrics: the manager adds them up once.
func FinishedSummaries(ctx context.Context, store *blobstore.Store, keys blobstore.ListKeys, plan *Plan) ([]Summary, error) {
	var out []Summary
	err := eachSummary(ctx, store, keys, plan, func(s Summary) bool {
		if s.Error == "" {
			out = append(out, s)
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
