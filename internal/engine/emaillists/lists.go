// Package emaillists classifies email addresses against lists of disposable
// and free-mail domains, role and dangerous mailbox names, and the
// operator-supplied spam-trap and suppression lists.
//
// The built-in lists are embedded (data/*.txt, refreshed by
// hack/fetch-email-lists.sh; sources and licences in data/SOURCES.md and
// docs/data-sources.md). Operators extend them with files in a directory, for
// example a mounted ConfigMap (LoadExtra, Watcher).
//
// A *Lists is an immutable snapshot and is safe for concurrent use. Classify
// does not allocate for ordinary input (ASCII lower-case domain, local part of
// at most 128 bytes in any case).
package emaillists

import (
	_ "embed"
	"maps"
	"strings"
	"sync"

	"github.com/emaildata/emaildata/internal/engine/emaillists/internal/norm"
)

// Domain types reported in Class.DomainType.
const (
	DomainBiz        = "biz"
	DomainFree       = "freeisp"
	DomainDisposable = "disposable"
)

// Embedded lists: one lower-case ASCII entry per line, '#' starts a comment
// line. Each file is embedded as a string so that map keys are substrings of
// read-only data: parsing copies no entry.
var (
	//go:embed data/disposable.txt
	disposableTxt string
	//go:embed data/free.txt
	freeTxt string
	//go:embed data/role.txt
	roleTxt string
	//go:embed data/dangerous.txt
	dangerousTxt string
)

// Flags in Lists.domains.
const (
	fDisposable uint8 = 1 << iota
	fFree
	fTrap
	fSuppressed
	// fFreeReg marks a free domain that is a registrable domain (its own
	// eTLD+1), so it covers its subdomains: computed when the lists are
	// built, which keeps the public suffix lookup off the hot path. (A
	// private suffix under a listed free domain would be covered too; no
	// free-mail domain has one.)
	fFreeReg
)

// Flags in Lists.locals.
const (
	fRole uint8 = 1 << iota
	fDangerous
)

// Class is the classification of one address.
type Class struct {
	DomainType string // DomainDisposable, DomainFree or DomainBiz
	Role       bool   // local part is a role mailbox (sales@, info@, ...)
	Dangerous  bool   // local part is a mailbox that is dangerous to mail (abuse@, spam@, ...)
	SpamTrap   bool   // address or domain configured as a spam trap
	Suppressed bool   // address or domain on the client suppression list
}

// Lists is an immutable snapshot of the classification lists; safe for
// concurrent use. The zero value classifies every address as DomainBiz with
// no flags.
type Lists struct {
	// domains maps a domain to fDisposable|fFree|fTrap|fSuppressed. A
	// disposable, spam-trap or suppressed domain also covers its subdomains;
	// a free domain covers itself and the domains whose registrable domain
	// (eTLD+1) it is.
	domains map[string]uint8
	// locals maps a lower-case local part without +tag to fRole|fDangerous.
	locals map[string]uint8
	// addrs maps a domain to its listed local parts (lower-case, as listed,
	// +tag included when listed) with fTrap|fSuppressed. Nil when empty.
	addrs map[string]map[string]uint8

	sizes Sizes
}

// Sizes counts the entries of a snapshot, for logs and metrics. Entries
// listed twice (built-in and extra, or disposable and free) count in each
// list they are in.
type Sizes struct {
	Disposable, Free, Role, Dangerous      int
	SpamTrapDomains, SpamTrapAddresses     int
	SuppressedDomains, SuppressedAddresses int
}

// Sizes returns the number of entries of each list.
func (l *Lists) Sizes() Sizes { return l.sizes }

var (
	defaultOnce  sync.Once
	defaultLists *Lists
)

// Default returns the built-in lists, parsed once on first use.
func Default() *Lists {
	defaultOnce.Do(func() { defaultLists = parseEmbedded() })
	return defaultLists
}

func parseEmbedded() *Lists {
	l := &Lists{
		domains: make(map[string]uint8, strings.Count(disposableTxt, "\n")+strings.Count(freeTxt, "\n")),
		locals:  make(map[string]uint8, strings.Count(roleTxt, "\n")+strings.Count(dangerousTxt, "\n")),
	}
	l.sizes.Disposable = addLines(l.domains, disposableTxt, fDisposable)
	l.sizes.Free = addLines(l.domains, freeTxt, fFree)
	markRegistrable(l.domains, freeTxt)
	l.sizes.Role = addLines(l.locals, roleTxt, fRole)
	l.sizes.Dangerous = addLines(l.locals, dangerousTxt, fDangerous)
	return l
}

// addLines adds every non-comment line of data (already normalised by
// hack/fetch-email-lists.sh, checked by the tests) to m with flag. It returns
// the number of entries.
func addLines(m map[string]uint8, data string, flag uint8) int {
	n := 0
	for len(data) > 0 {
		line := data
		if i := strings.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = ""
		}
		line = strings.TrimSuffix(line, "\r")
		if line == "" || line[0] == '#' {
			continue
		}
		m[line] |= flag
		n++
	}
	return n
}

// markRegistrable sets fFreeReg on the free domains (lines of data) that are
// registrable domains.
func markRegistrable(m map[string]uint8, data string) {
	for len(data) > 0 {
		line := data
		if i := strings.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = ""
		}
		line = strings.TrimSuffix(line, "\r")
		if line != "" && line[0] != '#' && norm.Registrable(line) {
			m[line] |= fFreeReg
		}
	}
}

// With returns a new snapshot holding l's entries and extra's; l is not
// modified. Entries are normalised as LoadExtra does (trimmed, lower-cased,
// internationalised domains to ASCII); entries that are not valid are skipped
// silently, so validate operator input with LoadExtra or Extra.Validate. With
// an empty extra it returns l itself.
func (l *Lists) With(extra Extra) *Lists {
	if extra.empty() {
		return l
	}
	n := &Lists{
		domains: maps.Clone(l.domains),
		locals:  maps.Clone(l.locals),
		sizes:   l.sizes,
	}
	if n.domains == nil {
		n.domains = make(map[string]uint8)
	}
	if n.locals == nil {
		n.locals = make(map[string]uint8)
	}
	if len(l.addrs) > 0 || len(extra.SpamTrapAddresses) > 0 || len(extra.SuppressedAddresses) > 0 {
		n.addrs = maps.Clone(l.addrs)
		if n.addrs == nil {
			n.addrs = make(map[string]map[string]uint8)
		}
	}
	cloned := map[string]bool{} // inner address maps already copied for n

	addDomains := func(list []string, k kind, flag uint8, count *int) {
		for _, s := range list {
			d, err := normalise(k, s)
			if err != nil {
				continue
			}
			if flag == fFree && norm.Registrable(d) {
				n.domains[d] |= fFreeReg
			}
			n.domains[d] |= flag
			*count++
		}
	}
	addLocals := func(list []string, k kind, flag uint8, count *int) {
		for _, s := range list {
			lp, err := normalise(k, s)
			if err != nil {
				continue
			}
			n.locals[lp] |= flag
			*count++
		}
	}
	addAddrs := func(list []string, k kind, flag uint8, count *int) {
		for _, s := range list {
			a, err := normalise(k, s)
			if err != nil {
				continue
			}
			at := strings.LastIndexByte(a, '@')
			lp, d := a[:at], a[at+1:]
			m := n.addrs[d]
			if !cloned[d] {
				m = maps.Clone(m)
				if m == nil {
					m = make(map[string]uint8)
				}
				n.addrs[d] = m
				cloned[d] = true
			}
			m[lp] |= flag
			*count++
		}
	}
	addDomains(extra.Disposable, kindDisposable, fDisposable, &n.sizes.Disposable)
	addDomains(extra.Free, kindFree, fFree, &n.sizes.Free)
	addDomains(extra.SpamTrapDomains, kindTrapDomain, fTrap, &n.sizes.SpamTrapDomains)
	addDomains(extra.SuppressedDomains, kindSuppressedDomain, fSuppressed, &n.sizes.SuppressedDomains)
	addLocals(extra.Role, kindRole, fRole, &n.sizes.Role)
	addLocals(extra.Dangerous, kindDangerous, fDangerous, &n.sizes.Dangerous)
	addAddrs(extra.SpamTrapAddresses, kindTrapAddress, fTrap, &n.sizes.SpamTrapAddresses)
	addAddrs(extra.SuppressedAddresses, kindSuppressedAddress, fSuppressed, &n.sizes.SuppressedAddresses)
	return n
}

// Classify classifies the address local@domain.
//
// domain is expected in ASCII lower case (A-labels for internationalised
// domains); other input is lower-cased at the cost of an allocation, and a
// trailing dot is ignored. local is the local part as written: it is compared
// case-insensitively (ASCII), and a +tag is stripped for the role and
// dangerous lists. Spam-trap and suppressed addresses match the local part
// with its +tag and without it, so listing john@x.com also covers
// john+news@x.com, while listing john+news@x.com covers only that tag.
//
// Disposable, spam-trap and suppressed domains cover their subdomains
// (x.mailinator.com is disposable); a free domain covers itself and the
// domains whose registrable domain (publicsuffix eTLD+1) it is. Disposable
// wins over free.
func (l *Lists) Classify(local, domain string) Class {
	c := Class{DomainType: DomainBiz}
	d := domain
	if needsFold(d) {
		d = norm.ASCIILower(strings.TrimSuffix(d, "."))
	}

	// Domain and its parents, never the last label alone.
	var df uint8
	for i := 0; ; {
		j := strings.IndexByte(d[i:], '.')
		if j < 0 {
			break
		}
		if f := l.domains[d[i:]]; f != 0 {
			if i > 0 && f&fFreeReg == 0 {
				f &^= fFree
			}
			df |= f
		}
		i += j + 1
	}
	switch {
	case df&fDisposable != 0:
		c.DomainType = DomainDisposable
	case df&fFree != 0:
		c.DomainType = DomainFree
	}

	// Local part, lower-cased in a stack buffer.
	var buf [128]byte
	var lc []byte
	if len(local) <= len(buf) {
		lc = buf[:len(local)]
		for i := 0; i < len(local); i++ {
			b := local[i]
			if 'A' <= b && b <= 'Z' {
				b += 'a' - 'A'
			}
			lc[i] = b
		}
	} else {
		lc = []byte(norm.ASCIILower(local))
	}
	base := lc
	for i, b := range lc {
		if b == '+' {
			base = lc[:i]
			break
		}
	}
	if len(base) > 0 {
		lf := l.locals[string(base)]
		c.Role = lf&fRole != 0
		c.Dangerous = lf&fDangerous != 0
	}

	af := df
	if len(l.addrs) > 0 {
		if m := l.addrs[d]; m != nil {
			af |= m[string(lc)]
			if len(base) != len(lc) {
				af |= m[string(base)]
			}
		}
	}
	c.SpamTrap = af&fTrap != 0
	c.Suppressed = af&fSuppressed != 0
	return c
}

// needsFold reports whether d has an ASCII upper-case letter or a trailing dot.
func needsFold(d string) bool {
	for i := 0; i < len(d); i++ {
		if b := d[i]; 'A' <= b && b <= 'Z' {
			return true
		}
	}
	return len(d) > 0 && d[len(d)-1] == '.'
}
