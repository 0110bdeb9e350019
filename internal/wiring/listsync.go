package wiring

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/emaildata/emaildata/internal/engine/emaillists"
	"github.com/emaildata/emaildata/internal/engine/verify"
	"github.com/emaildata/emaildata/internal/lists/blobstore"
)

// ListsBlobKey is where the manager publishes the operator's list
// extensions for worker Jobs, which cannot mount the operator namespace's
// ConfigMap.
const ListsBlobKey = "config/verify-lists.json"

// maxListsBlob bounds the published extensions read back by workers.
const maxListsBlob = 64 << 20

// PublishLists copies the extensions in dir to the store under key when
// they changed since last (which it returns for the next call).
func PublishLists(ctx context.Context, store *blobstore.Store, dir, key string, last *emaillists.Extra) (*emaillists.Extra, error) {
	extra, err := emaillists.LoadExtra(dir)
	if err != nil {
		return last, fmt.Errorf("lists in %s: %w", dir, err)
	}
	if last != nil && reflect.DeepEqual(*last, extra) {
		return last, nil
	}
	if err := store.WriteJSON(ctx, key, extra); err != nil {
		return last, err
	}
	return &extra, nil
}

// RunListsPublisher publishes the extensions every interval until ctx ends.
func RunListsPublisher(ctx context.Context, store *blobstore.Store, dir, key string, every time.Duration, logErr func(error)) {
	var last *emaillists.Extra
	for {
		var err error
		if last, err = PublishLists(ctx, store, dir, key, last); err != nil && logErr != nil {
			logErr(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}

// ApplyPublishedLists makes e use the embedded lists plus the extensions
// published under key. A missing object means no extensions.
func ApplyPublishedLists(ctx context.Context, e *verify.Engine, store *blobstore.Store, key string) error {
	var extra emaillists.Extra
	err := store.ReadJSON(ctx, key, maxListsBlob, &extra)
	if blobstore.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("published lists: %w", err)
	}
	if err := extra.Validate(); err != nil {
		return fmt.Errorf("published lists: %w", err)
	}
	lists := emaillists.Default().With(extra)
	e.Lists = func() *emaillists.Lists { return lists }
	return nil
}
