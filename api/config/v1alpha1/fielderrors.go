package v1alpha1

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// FieldError is one problem of a configuration, at its field path
// (verification.smtp.port, executor.jobs.tolerations[0].value).
type FieldError struct {
	Field, Detail string
}

func (e FieldError) Error() string { return e.Field + ": " + e.Detail }

// ErrorList is every problem Validate found.
type ErrorList []FieldError

// ToAggregate is the list as one error (nil when empty), one problem a
// line.
func (l ErrorList) ToAggregate() error {
	if len(l) == 0 {
		return nil
	}
	msgs := make([]string, len(l))
	for i, e := range l {
		msgs[i] = e.Error()
	}
	return errors.New(strings.Join(msgs, "\n"))
}

// path is a field path under construction.
type path string

func newPath(names ...string) path { return path(strings.Join(names, ".")) }

func (p path) child(names ...string) path { return path(string(p) + "." + strings.Join(names, ".")) }

func (p path) index(i int) path { return path(string(p) + "[" + strconv.Itoa(i) + "]") }

func (p path) key(k string) path { return path(string(p) + "[" + strconv.Quote(k) + "]") }

func invalid(p path, v any, detail string) FieldError {
	return FieldError{string(p), fmt.Sprintf("invalid value %v: %s", v, detail)}
}

func notSupported(p path, v string, allowed []string) FieldError {
	return FieldError{string(p), fmt.Sprintf("unsupported value %q: want %s", v, strings.Join(quoteAll(allowed), ", "))}
}

func quoteAll(vs []string) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = strconv.Quote(v)
	}
	return out
}

var (
	dns1123Label     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	dns1123Subdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

func isDNS1123Label(v string) bool { return len(v) <= 63 && dns1123Label.MatchString(v) }

func isDNS1123Subdomain(v string) bool { return len(v) <= 253 && dns1123Subdomain.MatchString(v) }
