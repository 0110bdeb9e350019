package fraud

import (
	"context"
	"path/filepath"
	"sync"
	"time"

	"github.com/emaildata/emaildata/internal/filesig"
)

// DefaultWatchInterval is the poll interval NewWatcher uses for every <= 0.
const DefaultWatchInterval = 10 * time.Second

// Watcher keeps a Scorer's configuration in step with a config file and the
// IP list files it names, for example a mounted ConfigMap. It polls file
// identities (following symlinks), so the symlink swap by which Kubernetes
// updates a ConfigMap volume is seen as a change. A load that fails is not
// applied: the previous configuration stays and LastError says why.
type Watcher struct {
	s     *Scorer
	path  string
	every time.Duration

	mu      sync.Mutex
	files   []string // config file, then list files of the last good load
	sig     filesig.Sig
	lastErr error
	loads   int
}

// NewWatcher loads path into s once and returns a watcher polling every
// interval (DefaultWatchInterval when <= 0). When that first load fails s
// keeps its configuration and LastError reports the failure.
func NewWatcher(s *Scorer, path string, every time.Duration) *Watcher {
	if every <= 0 {
		every = DefaultWatchInterval
	}
	w := &Watcher{s: s, path: path, every: every, files: []string{path}}
	w.Reload()
	return w
}

// Reload loads the files now and applies them when they parse; it returns
// the load's error.
func (w *Watcher) Reload() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for attempt := 0; ; attempt++ {
		before := filesig.Stat(w.files)
		cfg, err := LoadConfig(w.path)
		files := w.files
		if err == nil {
			files = append([]string{w.path}, cfg.listFiles(filepath.Dir(w.path))...)
		}
		after := filesig.Stat(files)
		if (len(files) != len(w.files) || !before.Same(after)) && attempt < 3 {
			w.files = files
			continue // files changed while being read: read them again
		}
		w.files, w.sig = files, after
		w.loads++
		w.lastErr = err
		if err == nil {
			w.s.SetConfig(cfg)
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
			changed := !w.sig.Same(filesig.Stat(w.files))
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
