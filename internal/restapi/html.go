package restapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"strings"
)

// tdHTML renders a GET /v5/td answer for a browser (format=html): one
// table row per field of the JSON answer, in its order; html/template
// escapes every value.
var tdHTML = template.Must(template.New("td").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Demographics</title></head>
<body>
{{if .}}<table>
<thead><tr><th>Field</th><th>Value</th></tr></thead>
<tbody>
{{range .}}<tr><td>{{.Name}}</td><td>{{.Value}}</td></tr>
{{end}}</tbody>
</table>{{else}}<p>No match.</p>{{end}}
</body></html>
`))

type htmlRow struct{ Name, Value string }

// writeHTML renders the JSON answer body as HTML.
func (s *Server) writeHTML(w http.ResponseWriter, r *http.Request, body []byte) {
	rows, err := htmlRows(body)
	if err != nil {
		s.internalError(w, r, "render html", err)
		return
	}
	var buf bytes.Buffer
	if err := tdHTML.Execute(&buf, rows); err != nil {
		s.internalError(w, r, "render html", err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf.Bytes())
}

// htmlRows flattens a JSON object into rows in document order: nested
// objects give "name.key" rows, except interests, whose true members are
// listed in one row.
func htmlRows(body []byte) ([]htmlRow, error) {
	var obj []struct {
		name string
		raw  json.RawMessage
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if _, err := dec.Token(); err != nil { // {
		return nil, err
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		obj = append(obj, struct {
			name string
			raw  json.RawMessage
		}{fmt.Sprint(t), raw})
	}
	var rows []htmlRow
	for _, m := range obj {
		if len(m.raw) == 0 || m.raw[0] != '{' {
			rows = append(rows, htmlRow{m.name, scalar(m.raw)})
			continue
		}
		sub, err := htmlRows(m.raw)
		if err != nil {
			return nil, err
		}
		if m.name == fieldInterests {
			var held []string
			for _, r := range sub {
				if r.Value == "true" {
					held = append(held, r.Name)
				}
			}
			rows = append(rows, htmlRow{m.name, strings.Join(held, ", ")})
			continue
		}
		for _, r := range sub {
			rows = append(rows, htmlRow{m.name + "." + r.Name, r.Value})
		}
	}
	return rows, nil
}

func scalar(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}
