// Command listgen writes one embedded list (internal/engine/emaillists/data/*.txt)
// from files unpacked from an npm package; hack/fetch-email-lists.sh runs it.
//
//	listgen -kind domain|local -o OUT -header TEXT [-subdomains] [-wildcard FILE]... FILE...
//
// Input files are JSON arrays of strings (*.json), JavaScript sources whose
// single-quoted string literals on lines of their own are the entries (*.js,
// read as text, never run), or text with one entry a line ('#' comments).
// Entries are normalised with the rules LoadExtra applies to operator files
// (lower case, ASCII/punycode, valid syntax); invalid ones are dropped and
// reported on stderr. The output is sorted bytewise, deduplicated, and starts
// with "# TEXT".
//
// Domains that are ICANN public suffixes ("edu.pl", "net.ua") are dropped, as
// LoadExtra refuses them. With -subdomains (the list's entries cover their
// subdomains, as disposable domains do), private public suffixes ("ddns.net",
// a dynamic DNS zone; "za.com") are dropped too, unless listed in a -wildcard
// file, whose entries are meant to cover every subdomain: otherwise one
// address seen at such a zone would flag every unrelated registrant under it.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/emaildata/emaildata/internal/engine/emaillists/internal/norm"
)

type fileList []string

func (f *fileList) String() string     { return strings.Join(*f, ",") }
func (f *fileList) Set(s string) error { *f = append(*f, s); return nil }

func main() {
	kind := flag.String("kind", "domain", "entry kind: domain or local")
	out := flag.String("o", "", "output file")
	header := flag.String("header", "", "header comment (without '# ')")
	subdomains := flag.Bool("subdomains", false, "entries cover their subdomains: drop private public suffixes not listed in a -wildcard file")
	var wildcard fileList
	flag.Var(&wildcard, "wildcard", "input file whose domains are meant to cover their subdomains (may repeat)")
	flag.Parse()
	if *out == "" || *header == "" || (*kind != "domain" && *kind != "local") || flag.NArg()+len(wildcard) == 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*kind, *out, *header, *subdomains, flag.Args(), wildcard); err != nil {
		fmt.Fprintln(os.Stderr, "listgen:", err)
		os.Exit(1)
	}
}

func run(kind, out, header string, subdomains bool, files, wildcard []string) error {
	var entries []string
	read, dropped := 0, 0
	inWildcard := map[string]bool{}
	for _, group := range []struct {
		files    []string
		wildcard bool
	}{{wildcard, true}, {files, false}} {
		for _, f := range group.files {
			items, err := readItems(f)
			if err != nil {
				return err
			}
			for _, s := range items {
				read++
				v, err := normalise(kind, s, !subdomains || group.wildcard || inWildcard[s])
				if err != nil {
					dropped++
					fmt.Fprintf(os.Stderr, "  %s: dropped %q: %v\n", filepath.Base(f), s, err)
					continue
				}
				if v != "" {
					entries = append(entries, v)
					if group.wildcard {
						inWildcard[v] = true
					}
				}
			}
		}
	}
	slices.Sort(entries)
	entries = slices.Compact(entries)
	if len(entries) == 0 {
		return fmt.Errorf("%s: no entries", out)
	}
	var b strings.Builder
	b.WriteString("# " + header + "\n")
	for _, e := range entries {
		b.WriteString(e + "\n")
	}
	tmp := out + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, out); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "  %s: %d read, %d dropped, %d written\n", filepath.Base(out), read, dropped, len(entries))
	return nil
}

var (
	jsLiteral    = regexp.MustCompile(`(?m)^\s*'([^'\n]+)',?\s*$`)
	jsAnyLiteral = regexp.MustCompile(`'[^'\n]*'`)
)

func readItems(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	switch {
	case strings.HasSuffix(path, ".json"):
		var items []string
		if err := json.Unmarshal(data, &items); err != nil {
			return nil, fmt.Errorf("%s: want a JSON array of strings: %v", path, err)
		}
		return items, nil
	case strings.HasSuffix(path, ".js"):
		var items []string
		for _, m := range jsLiteral.FindAllSubmatch(data, -1) {
			items = append(items, string(m[1]))
		}
		if len(items) == 0 {
			return nil, fmt.Errorf("%s: no string literals found; has the layout changed?", path)
		}
		if n := len(jsAnyLiteral.FindAll(data, -1)); n != len(items) {
			return nil, fmt.Errorf("%s: %d string literals, %d on lines of their own; has the layout changed?", path, n, len(items))
		}
		return items, nil
	default:
		var items []string
		for _, line := range strings.Split(string(data), "\n") {
			if i := strings.IndexByte(line, '#'); i >= 0 {
				line = line[:i]
			}
			items = append(items, line)
		}
		return items, nil
	}
}

// normalise returns the entry to write, "" for a blank one, or why it is
// dropped.
func normalise(kind, s string, keepPrivateSuffix bool) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", nil
	}
	if kind == "local" {
		v, err := norm.Local(s)
		if err == nil && strings.ContainsAny(v, "@+") {
			err = fmt.Errorf("'@' or '+' in a local part entry")
		}
		return v, err
	}
	s = strings.TrimPrefix(s, "*.")
	v, err := norm.Domain(s)
	if err != nil {
		return "", err
	}
	if suffix, _ := norm.PublicSuffix(v); suffix && !keepPrivateSuffix {
		return "", fmt.Errorf("a private public suffix (not in wildcard.json): its subdomains belong to unrelated registrants")
	}
	return v, nil
}
