package v1alpha1

import "testing"

func TestSameDelivery(t *testing.T) {
	all := []string{"email", "email_match_type"}
	d := &DeliveryStatus{Purchase: "p", Fields: []string{"email"}, MatchType: "I"}
	cases := []struct {
		name   string
		d      *DeliveryStatus
		fields []string
		mt     string
		want   bool
	}{
		{"same", d, []string{"email"}, "I", true},
		{"other match type", d, []string{"email"}, "H", false},
		{"default match type is H", d, []string{"email"}, "", false},
		{"all fields is not a subset", d, nil, "I", false},
		{"more fields", d, []string{"email", "email_match_type"}, "I", false},
		{"order does not matter", &DeliveryStatus{Fields: []string{"b", "a"}}, []string{"a", "b"}, "", true},
		{"no fields means all", &DeliveryStatus{Fields: nil}, []string{"email_match_type", "email"}, "H", true},
		{"purchased on completion, no options", nil, nil, "", true},
		{"purchased on completion, a subset", nil, []string{"email"}, "", false},
		{"purchased on completion, individual only", nil, nil, "I", false},
	}
	for _, tc := range cases {
		if got := SameDelivery(tc.d, tc.fields, tc.mt, all); got != tc.want {
			t.Errorf("%s: SameDelivery = %v, want %v", tc.name, got, tc.want)
		}
	}
}
