package emaillists

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/emaildata/emaildata/internal/engine/emaillists/internal/norm"
)

// Extra holds operator-supplied entries added to the built-in lists by
// Lists.With. Domains are written as in DNS ("example.com", internationalised
// names allowed), local parts as in an address ("sales"), addresses as
// "local@domain".
type Extra struct {
	Disposable          []string // domains; subdomains match too
	Free                []string // domains; exact or registrable-domain match
	Role                []string // local parts, without +tag
	Dangerous           []string // local parts, without +tag
	SpamTrapDomains     []string // domains; subdomains match too
	SpamTrapAddresses   []string // addresses; john@x also covers john+tag@x
	SuppressedAddresses []string // addresses; john@x also covers john+tag@x
	SuppressedDomains   []string // domains; subdomains match too
}

func (e Extra) empty() bool {
	return len(e.Disposable)+len(e.Free)+len(e.Role)+len(e.Dangerous)+
		len(e.SpamTrapDomains)+len(e.SpamTrapAddresses)+
		len(e.SuppressedAddresses)+len(e.SuppressedDomains) == 0
}

// kind is one of the operator files.
type kind int

const (
	kindDisposable kind = iota
	kindFree
	kindRole
	kindDangerous
	kindTrapDomain
	kindTrapAddress
	kindSuppressedAddress
	kindSuppressedDomain
	numKinds
)

// ExtraFiles returns the names of the files LoadExtra reads, in the order of
// the Extra fields. Every file is optional.
func ExtraFiles() []string { return append([]string(nil), extraFiles[:]...) }

var extraFiles = [...]string{
	kindDisposable:        "disposable.txt",
	kindFree:              "free.txt",
	kindRole:              "role.txt",
	kindDangerous:         "dangerous.txt",
	kindTrapDomain:        "spamtrap-domains.txt",
	kindTrapAddress:       "spamtrap-addresses.txt",
	kindSuppressedAddress: "suppressed-addresses.txt",
	kindSuppressedDomain:  "suppressed-domains.txt",
}

func (e *Extra) field(k kind) *[]string {
	switch k {
	case kindDisposable:
		return &e.Disposable
	case kindFree:
		return &e.Free
	case kindRole:
		return &e.Role
	case kindDangerous:
		return &e.Dangerous
	case kindTrapDomain:
		return &e.SpamTrapDomains
	case kindTrapAddress:
		return &e.SpamTrapAddresses
	case kindSuppressedAddress:
		return &e.SuppressedAddresses
	case kindSuppressedDomain:
		return &e.SuppressedDomains
	}
	panic("emaillists: unknown kind")
}

// EntryError is a malformed entry in an operator file (or Extra field).
type EntryError struct {
	File   string // path of the file, or the Extra field name for Validate
	Line   int    // 1-based line number, or the 1-based index for Validate
	Entry  string // the entry as written
	Reason string
}

func (e *EntryError) Error() string {
	return fmt.Sprintf("%s:%d: %s: %q", e.File, e.Line, e.Reason, e.Entry)
}

// maxReported caps the entry errors joined into one error.
const maxReported = 20

// LoadExtra reads the optional files named by ExtraFiles from dir (for example
// a mounted ConfigMap). A missing directory or file is not an error. Files
// have one entry a line; blank lines are ignored, and '#' starts a comment at
// the beginning of a line or after white space. Entries are lower-cased and
// internationalised domains converted to ASCII.
//
// Malformed entries make LoadExtra return an error joining one *EntryError
// per entry (file:line, the entry, why; at most 20, then a count), together
// with an Extra holding every valid entry: the caller decides whether to use
// it (Watcher does not). A file that cannot be read is an error too.
func LoadExtra(dir string) (Extra, error) {
	var extra Extra
	var errs []error
	reported, more := 0, 0
	for k := kind(0); k < numKinds; k++ {
		path := filepath.Join(dir, extraFiles[k])
		data, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		entries := parseFile(path, string(data), k, func(e *EntryError) {
			if reported < maxReported {
				errs = append(errs, e)
				reported++
			} else {
				more++
			}
		})
		*extra.field(k) = entries
	}
	if more > 0 {
		errs = append(errs, fmt.Errorf("%s: %d more malformed entries", dir, more))
	}
	return extra, errors.Join(errs...)
}

// parseFile returns the normalised entries of one file, reporting malformed
// ones to bad.
func parseFile(path, data string, k kind, bad func(*EntryError)) []string {
	data = strings.TrimPrefix(data, "\uFEFF")
	var out []string
	for n := 1; len(data) > 0; n++ {
		line := data
		if i := strings.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = ""
		}
		entry := stripComment(line)
		if entry == "" {
			continue
		}
		v, err := normalise(k, entry)
		if err != nil {
			bad(&EntryError{File: path, Line: n, Entry: entry, Reason: err.Error()})
			continue
		}
		out = append(out, v)
	}
	return out
}

// stripComment drops a comment ('#' at the start or after white space) and
// surrounding white space. '#' is allowed inside a local part, so "a#b" is
// kept.
func stripComment(line string) string {
	for i := 0; i < len(line); i++ {
		if line[i] == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t') {
			line = line[:i]
			break
		}
	}
	return strings.TrimSpace(line)
}

// Validate checks every entry of e as LoadExtra checks file lines; the error
// joins one *EntryError per malformed entry, with the field name as File and
// the 1-based index as Line.
func (e Extra) Validate() error {
	var errs []error
	names := [...]string{"Disposable", "Free", "Role", "Dangerous", "SpamTrapDomains",
		"SpamTrapAddresses", "SuppressedAddresses", "SuppressedDomains"}
	for k := kind(0); k < numKinds; k++ {
		for i, s := range *e.field(k) {
			if _, err := normalise(k, s); err != nil && len(errs) < maxReported {
				errs = append(errs, &EntryError{File: names[k], Line: i + 1, Entry: s, Reason: err.Error()})
			}
		}
	}
	return errors.Join(errs...)
}

// normalise returns the canonical form of one entry of kind k.
func normalise(k kind, s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", errors.New("empty entry")
	}
	switch k {
	case kindRole, kindDangerous:
		if strings.Contains(s, "@") {
			return "", errors.New("want a local part such as \"sales\", not an address")
		}
		lp, err := norm.Local(s)
		if err != nil {
			return "", err
		}
		if strings.Contains(lp, "+") {
			return "", errors.New("local parts are matched without their +tag, so an entry with '+' never matches")
		}
		return lp, nil
	case kindTrapAddress, kindSuppressedAddress:
		at := strings.LastIndexByte(s, '@')
		if at < 0 {
			return "", errors.New("want an address local@domain")
		}
		lp, err := norm.Local(s[:at])
		if err != nil {
			return "", err
		}
		d, err := norm.Domain(s[at+1:])
		if err != nil {
			return "", err
		}
		return lp + "@" + d, nil
	default:
		if strings.Contains(s, "@") {
			return "", errors.New("want a domain such as \"example.com\", not an address")
		}
		if strings.HasPrefix(s, "*.") {
			if k == kindFree {
				return "", errors.New("wildcards are not supported; a free domain covers the domains whose registrable domain it is")
			}
			return "", errors.New("wildcards are not supported; subdomains of a listed domain match already")
		}
		return norm.Domain(s)
	}
}
