package people

import (
	"reflect"
	"strings"
	"testing"
)

// TestInputFieldsAreJSONNames: the field names are Input's JSON names, in order.
func TestInputFieldsAreJSONNames(t *testing.T) {
	typ := reflect.TypeFor[Input]()
	if typ.NumField() != len(InputFields) {
		t.Fatalf("Input has %d fields, InputFields %d", typ.NumField(), len(InputFields))
	}
	for i, want := range InputFields {
		if got, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ","); got != want {
			t.Errorf("field %d (%s): JSON name %q, InputFields says %q", i, typ.Field(i).Name, got, want)
		}
	}
}
