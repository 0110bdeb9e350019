// Package logging builds the one logger every emaildata binary uses: a
// log/slog handler, with controller-runtime's logr on the same handler
// (logr.FromSlogHandler), so the manager, the API and make run emit one
// format and one field vocabulary.
package logging

import (
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/go-logr/logr"
)

// Keys used for the same things by every binary. KeyError is what logr's
// slog bridge names the error of Logger.Error, so slog callers use it too.
const (
	KeyError     = "err"
	KeyRequestID = "request_id"
)

// Formats of Options.Format.
const (
	FormatJSON = "json"
	FormatText = "text"
)

// Options choose the level and the format.
type Options struct {
	Level  slog.Level
	Format string
}

// BindFlags binds --log-level and --log-format, with def's values as the
// defaults.
func (o *Options) BindFlags(fs *flag.FlagSet, def Options) {
	fs.TextVar(&o.Level, "log-level", def.Level, "least severe level logged: debug, info, warn or error (logr's V(n) is slog level -n)")
	fs.StringVar(&o.Format, "log-format", def.Format, "json or text")
}

// New returns a logger writing to w.
func New(w io.Writer, o Options) (*slog.Logger, error) {
	ho := &slog.HandlerOptions{Level: o.Level}
	switch o.Format {
	case FormatJSON, "":
		return slog.New(slog.NewJSONHandler(w, ho)), nil
	case FormatText:
		return slog.New(slog.NewTextHandler(w, ho)), nil
	}
	return nil, fmt.Errorf("log format %q: want %s or %s", o.Format, FormatJSON, FormatText)
}

// Logr is l as a logr.Logger, for controller-runtime (ctrl.SetLogger).
func Logr(l *slog.Logger) logr.Logger { return logr.FromSlogHandler(l.Handler()) }
