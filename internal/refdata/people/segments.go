package people

import "slices"

// Life stage and financial segments: each segment belongs to one group, in
// the order the groups are listed (two segments a group). The names are
// this project's own; only the field names follow the published API. The
// lists are append-only: stored codes are positions.

var lifeStageGroups = []string{
	"Young Singles", "Young Couples", "Young Families",
	"Established Families", "Empty Nesters", "Retirees",
}

var lifeStageSegments = [][2]string{
	{"Starting Out", "Urban Singles"},
	{"Young Renting Couples", "Young Homeowning Couples"},
	{"New Parents", "Growing Families"},
	{"Busy Families", "Teen Households"},
	{"Active Empty Nesters", "Comfortable Empty Nesters"},
	{"Active Retirees", "Senior Living"},
}

var financialGroups = []string{
	"Stretched", "Getting By", "Comfortable", "Prosperous", "Affluent",
}

var financialSegments = [][2]string{
	{"Struggling Renters", "Stretched Families"},
	{"Budget Conscious", "Steady Savers"},
	{"Middle Income Owners", "Comfortable Savers"},
	{"Prosperous Professionals", "Investing Families"},
	{"Wealthy Achievers", "Top Tier Affluent"},
}

// LifeStageSegments returns the life_stage_segment values in order; the
// segments of group i (Buckets("life_stage_group")[i]) are at 2i and 2i+1.
func LifeStageSegments() []string { return flatten(lifeStageSegments) }

// FinancialSegments returns the financial_segment values in order; the
// segments of group i are at 2i and 2i+1.
func FinancialSegments() []string { return flatten(financialSegments) }

// SegmentGroup returns the group a life stage or financial segment belongs
// to, or "" for an unknown segment.
func SegmentGroup(segment string) string {
	for i, p := range lifeStageSegments {
		if slices.Contains(p[:], segment) {
			return lifeStageGroups[i]
		}
	}
	for i, p := range financialSegments {
		if slices.Contains(p[:], segment) {
			return financialGroups[i]
		}
	}
	return ""
}

func flatten(pairs [][2]string) []string {
	out := make([]string, 0, 2*len(pairs))
	for _, p := range pairs {
		out = append(out, p[0], p[1])
	}
	return out
}
