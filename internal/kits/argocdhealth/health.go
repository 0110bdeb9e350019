// Package argocdhealth runs Argo CD resource health checks (Lua) the way
// Argo CD does, with the interpreter Argo CD uses (gopher-lua): the object
// is the global obj, the script returns a table with status and message.
// Tests use it to check the checks emaildata ships in
// charts/emaildata/files/argocd against real objects.
package argocdhealth

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	lua "github.com/yuin/gopher-lua"
)

// The health statuses Argo CD knows.
const (
	Healthy     = "Healthy"
	Progressing = "Progressing"
	Degraded    = "Degraded"
	Suspended   = "Suspended"
	Missing     = "Missing"
	Unknown     = "Unknown"
)

// Status is a check's verdict.
type Status struct {
	Status  string
	Message string
}

// Load reads the check of kind (EmailList, Purchase, Dataset) from dir.
func Load(dir, kind string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, kind+".lua"))
	if err != nil {
		return "", fmt.Errorf("load the %s health check: %w", kind, err)
	}
	return string(b), nil
}

// Evaluate runs script with obj (an object as JSON decodes it) as the
// global obj, in a state holding only the base, table, string and math
// libraries (Argo CD's sandbox has no io and only a safe os).
func Evaluate(script string, obj map[string]any) (Status, error) {
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{{lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}, {lua.StringLibName, lua.OpenString}, {lua.MathLibName, lua.OpenMath}} {
		l.Push(l.NewFunction(lib.open))
		l.Push(lua.LString(lib.name))
		l.Call(1, 0)
	}
	l.SetGlobal("obj", toLua(l, obj))
	if err := l.DoString(script); err != nil {
		return Status{}, fmt.Errorf("run the health check: %w", err)
	}
	tbl, ok := l.Get(-1).(*lua.LTable)
	if !ok {
		return Status{}, errors.New("the health check returned no table")
	}
	st := Status{Status: lua.LVAsString(tbl.RawGetString("status")), Message: lua.LVAsString(tbl.RawGetString("message"))}
	switch st.Status {
	case Healthy, Progressing, Degraded, Suspended, Missing, Unknown:
		return st, nil
	}
	return st, fmt.Errorf("the health check returned the unknown status %q", st.Status)
}

// toLua converts a JSON-decoded value as Argo CD does: objects and arrays
// become tables, numbers numbers.
func toLua(l *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case nil:
		return lua.LNil
	case bool:
		return lua.LBool(v)
	case string:
		return lua.LString(v)
	case int64:
		return lua.LNumber(v)
	case int:
		return lua.LNumber(v)
	case int32:
		return lua.LNumber(v)
	case float64:
		return lua.LNumber(v)
	case map[string]any:
		t := l.NewTable()
		for k, e := range v {
			t.RawSetString(k, toLua(l, e))
		}
		return t
	case []any:
		t := l.NewTable()
		for _, e := range v {
			t.Append(toLua(l, e))
		}
		return t
	}
	return lua.LString(fmt.Sprint(v))
}
