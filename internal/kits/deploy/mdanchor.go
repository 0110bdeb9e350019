package deploy

import (
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// MarkdownAnchors returns the fragment anchors of a Markdown document as
// GitHub renders it: one per heading (ATX "## Title" and setext, outside
// fenced code blocks), slugged as GitHub does (see Slug), a repeated slug
// taking -1, -2, ... in document order; and the id or name of HTML anchors
// (<a id="x">). The runbook links of the alerts are checked against it.
func MarkdownAnchors(doc string) map[string]bool {
	anchors := map[string]bool{}
	taken := map[string]bool{} // headings' anchors only: HTML ids do not shift them
	repeats := map[string]int{}
	// As github-slugger does: a taken slug gets the next free -N suffix,
	// and the suffixed slug is taken in turn ("A", "A", "A-1": a, a-1, a-1-1).
	add := func(heading string) {
		slug := Slug(heading)
		anchor := slug
		for taken[anchor] {
			repeats[slug]++
			anchor = slug + "-" + strconv.Itoa(repeats[slug])
		}
		taken[anchor], anchors[anchor] = true, true
	}
	var fence string // the open fence's marker, "" outside code
	prev := ""       // the previous line, if it may start a setext heading
	for _, line := range strings.Split(strings.ReplaceAll(doc, "\r\n", "\n"), "\n") {
		trimmed := strings.TrimLeft(line, " ")
		indent := len(line) - len(trimmed)
		if fence != "" {
			if indent < 4 && strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]+" \t") == "" {
				fence = ""
			}
			continue
		}
		if indent < 4 {
			if f := fenceMarker(trimmed); f != "" {
				fence, prev = f, ""
				continue
			}
			if h, ok := atxHeading(trimmed); ok {
				add(h)
				prev = ""
				continue
			}
			if prev != "" && setextUnderline(trimmed) {
				add(prev)
				prev = ""
				continue
			}
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			anchors[m[1]] = true
		}
		prev = ""
		if indent < 4 && strings.TrimSpace(line) != "" && !blockStart.MatchString(trimmed) {
			prev = strings.TrimSpace(line)
		}
	}
	return anchors
}

var (
	htmlAnchor = regexp.MustCompile(`<a\s+(?:[^>]*\s)?(?:id|name)="([^"]+)"`)
	// Lines that open another block, so the line after them is no setext
	// underline of theirs (lists, quotes, tables' rules are close enough).
	blockStart = regexp.MustCompile(`^([-*+>|]\s|\d+[.)]\s|<)`)
)

// fenceMarker is the fence a line opens (``` or ~~~, three or more), or "".
func fenceMarker(line string) string {
	for _, c := range []string{"`", "~"} {
		n := len(line) - len(strings.TrimLeft(line, c))
		if n >= 3 && !(c == "`" && strings.Contains(line[n:], "`")) {
			return strings.Repeat(c, n)
		}
	}
	return ""
}

// atxHeading is the text of an ATX heading line: 1 to 6 '#', then a space
// or nothing; a closing run of '#' after a space is dropped.
func atxHeading(line string) (string, bool) {
	n := len(line) - len(strings.TrimLeft(line, "#"))
	if n < 1 || n > 6 || (len(line) > n && line[n] != ' ' && line[n] != '\t') {
		return "", false
	}
	text := strings.TrimSpace(line[n:])
	if t := strings.TrimRight(text, "#"); t == "" || strings.HasSuffix(t, " ") || strings.HasSuffix(t, "\t") {
		text = strings.TrimSpace(t)
	}
	return text, true
}

func setextUnderline(line string) bool {
	t := strings.TrimSpace(line)
	return t != "" && (strings.Trim(t, "=") == "" || strings.Trim(t, "-") == "")
}

var (
	inlineLink = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	inlineTag  = regexp.MustCompile(`<[^>]+>`)
)

// Slug is GitHub's anchor for a heading's text: the rendered text (inline
// code, emphasis and links reduced to their words, HTML tags dropped) in
// lower case, every character but letters, digits, marks, '-', '_' and
// spaces dropped, then each space made a '-'.
func Slug(heading string) string {
	text := inlineLink.ReplaceAllString(heading, "$1")
	text = inlineTag.ReplaceAllString(text, "")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
