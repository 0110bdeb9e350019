package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRun(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	index := write("index.json", `["B.example","a.example","a.example","edu.pl","za.com","ddns.net","bücher.example","bad_domain.example","*.star.example"]`)
	wild := write("wildcard.json", `["ddns.net","my.id"]`)
	js := write("index.js", "const A = [\n  'Info',\n  'sales',\n  'no reply',\n];\n  'x+y',\n")
	jsInline := write("inline.js", "const A = [\n  'info',\n];\nconst B = ['inline', 'missed'];\n")
	tests := []struct {
		name       string
		kind       string
		subdomains bool
		files      []string
		wildcard   []string
		want       string
	}{
		{"disposable", "domain", true, []string{index}, []string{wild},
			"# h\na.example\nb.example\nddns.net\nstar.example\nxn--bcher-kva.example\n"},
		{"free", "domain", false, []string{index}, nil,
			"# h\na.example\nb.example\nddns.net\nstar.example\nxn--bcher-kva.example\nza.com\n"},
		{"role", "local", false, []string{js}, nil, "# h\ninfo\nsales\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(dir, tt.name+".txt")
			if err := run(tt.kind, out, "h", tt.subdomains, tt.files, tt.wildcard); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
	if err := run("local", filepath.Join(dir, "x.txt"), "h", false, []string{jsInline}, nil); err == nil {
		t.Error("no error for literals the reader would miss")
	}
	if err := run("domain", filepath.Join(dir, "x.txt"), "h", false, []string{write("empty.json", "[]")}, nil); err == nil {
		t.Error("no error for an empty list")
	}
	if err := run("domain", filepath.Join(dir, "x.txt"), "h", false, []string{write("obj.json", "{}")}, nil); err == nil {
		t.Error("no error for a JSON object")
	}
}
