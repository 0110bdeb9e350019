package people

import (
	"errors"
	"strings"
	"testing"
)

func TestInputCheck(t *testing.T) {
	md5 := EmailMD5("ann@example.com")
	sha1 := EmailSHA1("ann@example.com")
	for _, tc := range []struct {
		name  string
		in    Input
		field string // "" for usable; "-" for ErrNoIdentifier
	}{
		{"email", Input{Email: " Ann@Example.com "}, ""},
		{"md5", Input{MD5Email: strings.ToUpper(md5)}, ""},
		{"sha1", Input{SHA1Email: sha1}, ""},
		{"digest in email", Input{Email: md5}, ""},
		{"name and zip", Input{First: "Ann", Last: "Lee", Zip: "80203"}, ""},
		{"name and zip4", Input{First: "Ann", Last: "Lee", Zip4: "80203-1234"}, ""},
		{"name, city and state", Input{First: "Ann", Last: "Lee", Street: "12 Oak St", City: "Denver", State: "CO"}, ""},
		{"last name and street", Input{Last: "Lee", Street: "12 Oak St", Zip: "80203"}, ""},
		{"not an email", Input{Email: "not an email"}, "email"},
		{"not an email, with name and zip", Input{Email: "n/a", First: "Ann", Last: "Lee", Zip: "80203"}, "email"},
		{"short md5", Input{MD5Email: md5[:31]}, "md5_email"},
		{"md5 given as sha1", Input{SHA1Email: md5}, "sha1_email"},
		{"good email, bad md5", Input{Email: "ann@example.com", MD5Email: "xyz"}, "md5_email"},
		{"empty", Input{}, "-"},
		{"blank email", Input{Email: "   "}, "-"},
		{"name only", Input{First: "Ann", Last: "Lee"}, "-"},
		{"name and bad zip", Input{First: "Ann", Last: "Lee", Zip: "ABCDE"}, "-"},
		{"name and city without state", Input{First: "Ann", Last: "Lee", City: "Denver"}, "-"},
		{"last name and zip only", Input{Last: "Lee", Zip: "80203"}, "-"},
		{"first name and zip only", Input{First: "Ann", Zip: "80203"}, "-"},
	} {
		err := tc.in.Check()
		var ie *InvalidIdentifierError
		switch tc.field {
		case "":
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
		case "-":
			if !errors.Is(err, ErrNoIdentifier) {
				t.Errorf("%s: %v, want ErrNoIdentifier", tc.name, err)
			}
		default:
			if !errors.As(err, &ie) || ie.Field != tc.field {
				t.Errorf("%s: %v, want the field %s", tc.name, err, tc.field)
			}
		}
		if err != nil && tc.in.Email != "" && len(tc.in.Email) > 3 && strings.Contains(err.Error(), strings.TrimSpace(tc.in.Email)) {
			t.Errorf("%s: the error carries the value", tc.name)
		}
	}
}
