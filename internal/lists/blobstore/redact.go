package blobstore

import (
	"strings"

	"github.com/emaildata/emaildata/internal/platform/redact"
)

// Errors of the store say where: a file store's *fs.PathError names the
// server's file ("write /var/lib/emaildata/store/lists/<uid>/parts/
// 00000.part.18c2f.tmp: no space left on device"), an S3 store's
// *url.Error its endpoint, a *net.OpError an internal address. What a
// client reads (a list's status, its events, a REST answer) names the
// condition, never the place: Redact renders an error that way (see
// internal/platform/redact), and the caller logs the error itself.

// StoreRootMark stands for the store's directory in a message that named
// it in plain text (an error that is no *fs.PathError).
const StoreRootMark = "<store>"

// Redact renders err for a client as redact.Error does (each
// *fs.PathError and *os.LinkError in its chain reads as its operation and
// cause, "write: no space left on device"; each *url.Error and
// *net.OpError loses its URL or addresses), and replaces a file store's
// directory left anywhere in the text by StoreRootMark. The rest of the message is kept, so errors about the
// list's content (which name no path) read as they are.
func (s *Store) Redact(err error) string {
	if err == nil {
		return ""
	}
	msg := redact.Error(err)
	if s != nil && s.url != nil && s.url.Scheme == "file" && len(s.url.Path) > 1 {
		msg = strings.ReplaceAll(msg, strings.TrimSuffix(s.url.Path, "/"), StoreRootMark)
	}
	return msg
}
