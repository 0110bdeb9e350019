package services

import "testing"

func TestPurchasable(t *testing.T) {
	for s, want := range map[string]bool{
		EmailValidation: false, EmailAppend: true, EmailIntelligence: true,
		Fraud: false, Demographics: false, "": false, "nope": false,
	} {
		if got := Purchasable(s); got != want {
			t.Errorf("Purchasable(%q) = %v, want %v", s, got, want)
		}
	}
}
