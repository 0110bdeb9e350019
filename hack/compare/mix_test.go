package main

import "testing"

// TestDealMix: every row goes to exactly one participant, the API rows are
// spread over the whole list and the lists get equal shares of the rest.
func TestDealMix(t *testing.T) {
	for _, tc := range []struct {
		name            string
		n               int
		m               mixSettings
		wantAPI, maxGap int
	}{
		{"three lists, two API", 20000, mixSettings{lists: 3, apiProcs: 2, apiRows: 2000}, 2000, 10},
		{"no API", 100, mixSettings{lists: 3, apiProcs: 0, apiRows: 50}, 0, 0},
		{"more API rows than rows", 10, mixSettings{lists: 2, apiProcs: 3, apiRows: 50}, 10, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lists, apis := dealMix(tc.n, tc.m)
			seen := make([]int, tc.n)
			api := 0
			for _, a := range apis {
				for k, i := range a {
					seen[i]++
					api++
					if k > 0 && i-a[k-1] > tc.maxGap*len(apis) {
						t.Errorf("API rows %d and %d are %d apart: not spread over the list", a[k-1], i, i-a[k-1])
					}
				}
			}
			last := -1
			for _, a := range apis {
				if len(a) > 0 {
					last = max(last, a[len(a)-1])
				}
			}
			if api > 0 && last < tc.n*9/10 {
				t.Errorf("the last API row is %d of %d: not spread over the list", last, tc.n)
			}
			if api != tc.wantAPI {
				t.Errorf("%d API rows, want %d", api, tc.wantAPI)
			}
			for _, l := range lists {
				if d := len(l) - len(lists[0]); d < -1 || d > 1 {
					t.Errorf("list sizes %d and %d differ by more than one", len(l), len(lists[0]))
				}
				for _, i := range l {
					seen[i]++
				}
			}
			for i, c := range seen {
				if c != 1 {
					t.Fatalf("row %d dealt %d times", i, c)
				}
			}
		})
	}
}
