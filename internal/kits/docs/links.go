// Package docs keeps the repository's Markdown from rotting: it finds the
// relative links and anchors of README.md and docs/*.md that resolve to
// nothing, and generates the pages (or sections of pages) that restate
// what the code says: the configuration reference from the binaries'
// --help, the resources' field reference from the CRDs. Its tests run in
// make test; it is a kit, never linked by a binary.
package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/emaildata/emaildata/internal/kits/deploy"
)

// A Link is one relative link of a Markdown file.
type Link struct {
	File   string // the file holding the link, relative to the root
	Line   int
	Target string // as written
}

var (
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	refDef     = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+"[^"]*")?\s*$`)
	codeSpan   = regexp.MustCompile("`+[^`]*`+")
	scheme     = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// Links returns the relative links of a Markdown document (those with no
// URL scheme), outside fenced code blocks and code spans.
func Links(file, doc string) []Link {
	var out []Link
	fence := ""
	for i, line := range strings.Split(doc, "\n") {
		trimmed := strings.TrimLeft(line, " ")
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		text := codeSpan.ReplaceAllString(line, "")
		var targets []string
		for _, m := range inlineLink.FindAllStringSubmatch(text, -1) {
			targets = append(targets, m[1])
		}
		if m := refDef.FindStringSubmatch(text); m != nil {
			targets = append(targets, m[1])
		}
		for _, t := range targets {
			if !scheme.MatchString(t) {
				out = append(out, Link{File: file, Line: i + 1, Target: t})
			}
		}
	}
	return out
}

// Check resolves every relative link of the Markdown files (paths relative
// to root) and returns one message per link that resolves to nothing: a
// missing file, or an anchor no heading (nor HTML id) of the target
// Markdown file makes, by GitHub's slug rules.
func Check(root string, files []string) ([]string, error) {
	anchors := map[string]map[string]bool{} // by target file, read once
	anchorsOf := func(path string) (map[string]bool, error) {
		if a, ok := anchors[path]; ok {
			return a, nil
		}
		b, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			return nil, err
		}
		anchors[path] = deploy.MarkdownAnchors(string(b))
		return anchors[path], nil
	}
	var problems []string
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return nil, err
		}
		for _, l := range Links(f, string(b)) {
			if msg := resolve(root, l, anchorsOf); msg != "" {
				problems = append(problems, fmt.Sprintf("%s:%d: link %q: %s", l.File, l.Line, l.Target, msg))
			}
		}
	}
	return problems, nil
}

// resolve says what is wrong with one link, or "".
func resolve(root string, l Link, anchorsOf func(string) (map[string]bool, error)) string {
	path, anchor, _ := strings.Cut(l.Target, "#")
	target := l.File
	if path != "" {
		target = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(l.File), path)))
		if target == ".." || strings.HasPrefix(target, "../") {
			return "leaves the repository"
		}
		if _, err := os.Stat(filepath.Join(root, target)); err != nil {
			return "no such file " + target
		}
	}
	if anchor == "" || !strings.HasSuffix(target, ".md") {
		return ""
	}
	a, err := anchorsOf(target)
	if err != nil {
		return err.Error()
	}
	if !a[anchor] {
		return "no heading of " + target + " has the anchor #" + anchor
	}
	return ""
}

// MarkdownFiles lists README.md and docs/*.md, relative to root.
func MarkdownFiles(root string) ([]string, error) {
	files := []string{"README.md"}
	m, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	for _, f := range m {
		files = append(files, filepath.ToSlash(filepath.Join("docs", filepath.Base(f))))
	}
	return files, nil
}
