package emaillists

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emaildata/emaildata/internal/filesig"
)

// DefaultWatchInterval is the poll interval NewWatcher uses for every <= 0.
const DefaultWatchInterval = 10 * time.Second

// Watcher keeps a *Lists made of a base snapshot and the files of a directory
// (LoadExtra), reloading when the files change. It polls: every interval it
// stats the files of ExtraFiles, following symlinks, so the symlink swap by
// which Kubernetes updates a mounted ConfigMap (dir/x -> ..data/x, ..data ->
// ..2024_..) is seen as a change of file identity even when sizes and
// modification times are equal.
//
// A load that fails (malformed entry, unreadable file) is not published: the
// previous snapshot stays in use and LastError reports the failure until a
// later load succeeds.
type Watcher struct {
	base  *Lists
	dir   string
	every time.Duration

	cur atomic.Pointer[Lists]

	mu      sync.Mutex // serialises loads; guards the fields below
	sig     filesig.Sig
	lastErr error
	loads   int
}

// NewWatcher returns a watcher publishing base plus the files of dir, polled
// every interval (DefaultWatchInterval when every <= 0). It loads dir once
// before returning, so Lists is current at once; on failure Lists returns base
// and LastError says why.
func NewWatcher(base *Lists, dir string, every time.Duration) *Watcher {
	if every <= 0 {
		every = DefaultWatchInterval
	}
	w := &Watcher{base: base, dir: dir, every: every}
	w.cur.Store(base)
	w.Reload()
	return w
}

// Lists returns the current snapshot. It is cheap (an atomic load) and safe
// for concurrent use; callers should take one snapshot per unit of work.
func (w *Watcher) Lists() *Lists { return w.cur.Load() }

// LastError returns the error of the last load, nil when it succeeded.
func (w *Watcher) LastError() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastErr
}

// Loads returns how many loads (successful or not) the watcher has done.
func (w *Watcher) Loads() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.loads
}

// Run polls the directory until ctx is done, then returns nil.
func (w *Watcher) Run(ctx context.Context) error {
	t := time.NewTicker(w.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			w.mu.Lock()
			changed := !w.sig.Same(w.stat())
			w.mu.Unlock()
			if changed {
				w.Reload()
			}
		}
	}
}

// Reload loads the directory now and publishes the result when the load
// succeeds; it returns the load's error.
func (w *Watcher) Reload() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for attempt := 0; ; attempt++ {
		before := w.stat()
		extra, err := LoadExtra(w.dir)
		after := w.stat()
		if !before.Same(after) && attempt < 3 {
			continue // files changed while being read: read them again
		}
		w.sig = before
		w.loads++
		w.lastErr = err
		if err == nil {
			w.cur.Store(w.base.With(extra))
		}
		return err
	}
}

// stat returns the identity of every file LoadExtra reads.
func (w *Watcher) stat() filesig.Sig {
	paths := make([]string, len(extraFiles))
	for i, name := range extraFiles {
		paths[i] = filepath.Join(w.dir, name)
	}
	return filesig.Stat(paths)
}
