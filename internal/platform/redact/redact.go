// Package redact renders errors for the clients of the service: the
// condition, never the place. An *fs.PathError names a server's file
// ("write /var/lib/emaildata/store/lists/<uid>/parts/00000.part.18c2f.tmp:
// no space left on device"), a *url.Error a store's endpoint, a
// *net.OpError an internal address; what a client reads (a list's status
// and events, a REST answer) must name none of them. Callers log the error
// itself, where operators read it.
package redact

import (
	"io/fs"
	"net"
	"net/url"
	"os"
	"strings"
)

// Error renders err for a client: each *fs.PathError and *os.LinkError in
// its chain reads as its operation and cause ("write: no space left on
// device"), each *url.Error as its operation, "(the endpoint)" and its
// cause, each *net.OpError without its addresses. The rest of the
// message is kept, so errors about a list's content (which name no path)
// read as they are.
func Error(err error) string {
	if err == nil {
		return ""
	}
	var (
		pathErr *fs.PathError
		linkErr *os.LinkError
		urlErr  *url.Error
		opErr   *net.OpError
	)
	// Only err itself is matched here (errors.As would find one further
	// down and lose the text around it): the chain is walked below.
	switch {
	case asSelf(err, &pathErr):
		return pathErr.Op + ": " + Error(pathErr.Err)
	case asSelf(err, &linkErr):
		return linkErr.Op + ": " + Error(linkErr.Err)
	case asSelf(err, &urlErr):
		return urlErr.Op + " (the endpoint): " + Error(urlErr.Err)
	case asSelf(err, &opErr):
		op := opErr.Op
		if opErr.Net != "" {
			op += " " + opErr.Net
		}
		return op + ": " + Error(opErr.Err)
	}
	text := err.Error()
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		text = redactInner(text, u.Unwrap())
	case interface{ Unwrap() []error }:
		for _, inner := range u.Unwrap() {
			text = redactInner(text, inner)
		}
	}
	return text
}

// asSelf is errors.As for err itself, not its chain.
func asSelf[T error](err error, target *T) bool {
	t, ok := err.(T)
	if ok {
		*target = t
	}
	return ok
}

// redactInner replaces inner's text, where the wrapping error quotes it
// (as fmt.Errorf's %w and gocloud's wrappers do), by its redacted form.
func redactInner(text string, inner error) string {
	if inner == nil {
		return text
	}
	raw, red := inner.Error(), Error(inner)
	if raw == red {
		return text
	}
	return strings.ReplaceAll(text, raw, red)
}
