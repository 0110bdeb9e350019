// Package fielddocs reads the doc comments of a Go file's struct types, for
// the generators that turn the Configuration type into docs and a schema.
package fielddocs

import (
	"go/ast"
	"go/parser"
	"go/token"
)

// Parse maps each struct type declared at the top of the file at path to
// its fields' doc comments, by field name; the key "" holds the type's own.
func Parse(path string) (map[string]map[string]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]string{}
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.TYPE {
			continue
		}
		for _, s := range gd.Specs {
			ts := s.(*ast.TypeSpec)
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				continue
			}
			m := map[string]string{"": gd.Doc.Text()}
			for _, fl := range st.Fields.List {
				for _, n := range fl.Names {
					m[n.Name] = fl.Doc.Text()
				}
			}
			out[ts.Name.Name] = m
		}
	}
	return out, nil
}
