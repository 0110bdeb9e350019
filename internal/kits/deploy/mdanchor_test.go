package deploy

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// TestMarkdownAnchors: headings get GitHub's anchors (checked against what
// github.com renders for these headings), code blocks hold none, repeats
// are numbered, HTML anchors count.
func TestMarkdownAnchors(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      []string
	}{
		{"atx levels and closing hashes", "# One\n## Two ##\n###### Six\n####### seven\n#no-space\n", []string{"one", "two", "six"}},
		{"alert names", "### EmailDataListsStuckProcessing\n### EmailDataAPIDown\n", []string{"emaildatalistsstuckprocessing", "emaildataapidown"}},
		{"punctuation and spaces", "## Who may scrape the manager?\n## Pods and images: pinning (the digest)\n## A  double  space\n",
			[]string{"who-may-scrape-the-manager", "pods-and-images-pinning-the-digest", "a--double--space"}},
		{"inline markup", "### The `--worker-image` *flag*, [a link](https://x.example/y) and <kbd>k</kbd>\n",
			[]string{"the---worker-image-flag-a-link-and-k"}},
		{"unicode", "# Héllo wörld — ok\n", []string{"héllo-wörld--ok"}},
		{"duplicates", "# A\n## A\n# a\n# A-1\n", []string{"a", "a-1", "a-2", "a-1-1"}},
		{"fenced code", "```yaml\n# not: a heading\n```\n~~~~\n# nor\n~~~\n# still code\n~~~~\n# Yes\n", []string{"yes"}},
		{"backtick line is no fence", "``` a ` b\n# After\n", []string{"after"}},
		{"indented code", "    # code\n   # Three spaces\n", []string{"three-spaces"}},
		{"setext", "First title\n===\n\nSecond *title*\n---\n\n---\n- item\n---\n", []string{"first-title", "second-title"}},
		{"html anchors", `Text <a id="custom"></a> and <a class="x" name="legacy">.` + "\n", []string{"custom", "legacy"}},
		{"crlf", "# One\r\n## Two\r\n", []string{"one", "two"}},
	} {
		got := slices.Sorted(maps.Keys(MarkdownAnchors(tc.doc)))
		want := slices.Sorted(slices.Values(tc.want))
		if !slices.Equal(got, want) {
			t.Errorf("%s: anchors %q, want %q", tc.name, got, want)
		}
	}
}

// FuzzMarkdownAnchors: any document yields anchors in GitHub's alphabet
// (no capital letter, no space, no punctuation but '-' and '_') unless an
// HTML anchor names them, and never panics; testdata/fuzz holds the seeds.
func FuzzMarkdownAnchors(f *testing.F) {
	f.Add("# A\n")
	f.Fuzz(func(t *testing.T, doc string) {
		for a := range MarkdownAnchors(doc) {
			if strings.Contains(doc, `"`+a+`"`) {
				continue // an HTML anchor's own id
			}
			for _, r := range a {
				if unicode.IsUpper(r) || unicode.IsSpace(r) || (unicode.IsPunct(r) && r != '-' && r != '_') {
					t.Fatalf("anchor %q of %q has %q", a, doc, r)
				}
			}
		}
	})
}
