package fraud

import (
	"path/filepath"
	"time"

	"github.com/emaildata/emaildata/internal/platform/filesig"
)

// DefaultWatchInterval is the poll interval NewWatcher uses for every <= 0.
const DefaultWatchInterval = 10 * time.Second

// Watcher keeps a Scorer's configuration in step with a config file and the
// IP list files it names, for example a mounted ConfigMap. It polls file
// identities (following symlinks), so the symlink swap by which Kubernetes
// updates a ConfigMap volume is seen as a change. A load that fails is not
// applied: the previous configuration stays and LastError says why.
type Watcher struct {
	*filesig.Watcher
}

// NewWatcher loads path into s once and returns a watcher polling every
// interval (DefaultWatchInterval when <= 0). When that first load fails s
// keeps its configuration and LastError reports the failure.
func NewWatcher(s *Scorer, path string, every time.Duration) *Watcher {
	if every <= 0 {
		every = DefaultWatchInterval
	}
	// The files are the config file, then the list files of the last good load.
	w := &Watcher{filesig.NewWatcher(every, []string{path}, func(prev []string) ([]string, func(), error) {
		cfg, err := LoadConfig(path)
		if err != nil {
			return prev, nil, err
		}
		files := append([]string{path}, cfg.listFiles(filepath.Dir(path))...)
		return files, func() { s.SetConfig(cfg) }, nil
	})}
	w.Reload()
	return w
}
