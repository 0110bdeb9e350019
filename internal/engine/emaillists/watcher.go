package emaillists

import (
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/emaildata/emaildata/internal/platform/filesig"
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
	*filesig.Watcher
	base *Lists
	cur  atomic.Pointer[Lists]
}

// NewWatcher returns a watcher publishing base plus the files of dir, polled
// every interval (DefaultWatchInterval when every <= 0). It loads dir once
// before returning, so Lists is current at once; on failure Lists returns base
// and LastError says why.
func NewWatcher(base *Lists, dir string, every time.Duration) *Watcher {
	if every <= 0 {
		every = DefaultWatchInterval
	}
	paths := make([]string, len(extraFiles))
	for i, name := range extraFiles {
		paths[i] = filepath.Join(dir, name)
	}
	w := &Watcher{base: base}
	w.cur.Store(base)
	w.Watcher = filesig.NewWatcher(every, paths, func([]string) ([]string, func(), error) {
		extra, err := LoadExtra(dir)
		return paths, func() { w.cur.Store(base.With(extra)) }, err
	})
	w.Reload()
	return w
}

// Lists returns the current snapshot. It is cheap (an atomic load) and safe
// for concurrent use; callers should take one snapshot per unit of work.
func (w *Watcher) Lists() *Lists { return w.cur.Load() }
