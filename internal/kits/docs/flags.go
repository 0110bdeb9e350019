package docs

import (
	"fmt"
	"regexp"
	"strings"
)

// A Flag is one flag as a Go flag set's PrintDefaults shows it.
type Flag struct {
	Name, Type, Default, Usage string
}

var defaultSuffix = regexp.MustCompile(`\s*\(default (.*)\)$`)

// ParseHelp reads the flags out of a binary's -help output (the flag
// package's PrintDefaults format: "  -name type" then the usage indented
// by a tab on the following lines, or "  -x\tusage" on one line). Lines
// before the first flag (a usage line, a description) are skipped.
func ParseHelp(out string) []Flag {
	var flags []Flag
	var cur *Flag
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, "  -"):
			head, usage, oneLine := strings.Cut(strings.TrimPrefix(line, "  -"), "\t")
			name, typ, _ := strings.Cut(strings.TrimSpace(head), " ")
			flags = append(flags, Flag{Name: name, Type: typ})
			cur = &flags[len(flags)-1]
			if oneLine {
				cur.Usage = strings.TrimSpace(usage)
			}
		case cur != nil && strings.HasPrefix(line, "    \t"):
			cur.Usage = strings.TrimSpace(cur.Usage + " " + strings.TrimSpace(line))
		}
	}
	for i := range flags {
		if m := defaultSuffix.FindStringSubmatchIndex(flags[i].Usage); m != nil {
			flags[i].Default = flags[i].Usage[m[2]:m[3]]
			flags[i].Usage = flags[i].Usage[:m[0]]
		}
	}
	return flags
}

// FlagTable renders flags as a Markdown table.
func FlagTable(flags []Flag) string {
	var b strings.Builder
	b.WriteString("| Flag | Type | Default | Description |\n|---|---|---|---|\n")
	for _, f := range flags {
		def := ""
		if f.Default != "" {
			def = "`" + strings.Trim(f.Default, `"`) + "`"
			if strings.Trim(f.Default, `"`) == "" {
				def = ""
			}
		}
		typ := f.Type
		if typ == "" {
			typ = "bool"
		}
		fmt.Fprintf(&b, "| `--%s` | %s | %s | %s |\n", f.Name, typ, cell(def), cell(f.Usage))
	}
	return b.String()
}

// cell escapes what would end a table cell or open a tag.
func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	s = strings.ReplaceAll(s, "<", "&lt;")
	return strings.ReplaceAll(s, ">", "&gt;")
}
