package filesig

import (
	"context"
	"sync"
	"time"
)

// LoadFunc reads a set of files. prev are the files the last load read; it
// returns the files this load read (whose signature decides the next reload),
// an apply func that publishes what it read, and the load's error. apply is
// called only for the load that is kept and only when err is nil.
type LoadFunc func(prev []string) (paths []string, apply func(), err error)

// Watcher reloads files when their signature changes. It polls: the symlink
// swap by which Kubernetes updates a mounted ConfigMap is seen as a change of
// file identity even when sizes and modification times are equal. A load
// that fails is not applied: what was applied before stays, and LastError
// says why until a later load succeeds.
type Watcher struct {
	every time.Duration
	load  LoadFunc

	mu      sync.Mutex // serialises loads; guards the fields below
	paths   []string
	sig     Sig
	lastErr error
	loads   int
}

// NewWatcher returns a watcher of paths (the files before the first load),
// polled every interval. It does not load; call Reload for the first load.
func NewWatcher(every time.Duration, paths []string, load LoadFunc) *Watcher {
	return &Watcher{every: every, load: load, paths: paths}
}

// Reload loads the files now and applies the result when the load succeeds;
// it returns the load's error. Files that change while being read are read
// again (up to 3 times). The signature kept is the one taken after the kept
// load, over the files it read.
func (w *Watcher) Reload() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for attempt := 0; ; attempt++ {
		before := Stat(w.paths)
		paths, apply, err := w.load(w.paths)
		after := Stat(paths)
		if (len(paths) != len(w.paths) || !before.Same(after)) && attempt < 3 {
			w.paths = paths
			continue // files changed while being read: read them again
		}
		w.paths, w.sig = paths, after
		w.loads++
		w.lastErr = err
		if err == nil && apply != nil {
			apply()
		}
		return err
	}
}

// Run polls until ctx is done, then returns nil.
func (w *Watcher) Run(ctx context.Context) error {
	t := time.NewTicker(w.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			w.mu.Lock()
			changed := !w.sig.Same(Stat(w.paths))
			w.mu.Unlock()
			if changed {
				w.Reload()
			}
		}
	}
}

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
