package mailworld

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// GenerateGreylist is the greylisting window of generated greylisting
// domains.
const GenerateGreylist = 2 * time.Second

var genProviders = []struct {
	name     string
	mxHosts  int
	r452     bool
	maxConns int
}{
	{"hosting-one.test", 2, false, 0},
	{"cloudmx.test", 3, false, 0},
	{"smallbiz-mail.test", 1, true, 0},
	{"corp-gateway.test", 2, false, 20},
}

type genKind struct {
	weight float64
	apply  func(d *Domain, rng *rand.Rand)
}

var genKinds = []genKind{
	{50, func(d *Domain, rng *rand.Rand) { d.MXHosts = 1 + rng.IntN(3)/2 }}, // 1 or 2 hosts
	{12, func(d *Domain, rng *rand.Rand) { d.DefaultBehaviour = CatchAll; d.MXHosts = 1 + rng.IntN(2) }},
	{15, func(d *Domain, rng *rand.Rand) {
		p := genProviders[rng.IntN(len(genProviders))]
		d.Provider, d.MXHosts, d.SecondRCPT452, d.MaxConns = p.name, p.mxHosts, p.r452, p.maxConns
		if rng.IntN(10) == 0 {
			d.DefaultBehaviour = CatchAll
		}
	}},
	{5, func(d *Domain, _ *rand.Rand) { d.NXDomain = true }},
	{1.5, func(d *Domain, _ *rand.Rand) { d.NullMX = true }},
	{1.5, func(d *Domain, _ *rand.Rand) { d.NoAddress = true }},
	{4, func(d *Domain, _ *rand.Rand) { d.NoMX = true }},
	{3, func(d *Domain, _ *rand.Rand) { d.Greylist = GenerateGreylist }},
	{2, func(d *Domain, _ *rand.Rand) { d.PolicyReject = true }},
	{0.5, func(d *Domain, _ *rand.Rand) { d.Tarpit = true }},
	{0.5, func(d *Domain, _ *rand.Rand) { d.DropConnection = true }},
	{0.5, func(d *Domain, _ *rand.Rand) { d.DropAtRCPT = true }},
	{2.5, func(d *Domain, _ *rand.Rand) { d.SecondRCPT452 = true }},
	{2, func(d *Domain, _ *rand.Rand) { d.PrimaryDown = true; d.MXHosts = 2 }},
}

var (
	genWords = []string{"acme", "blue", "north", "river", "stone", "cedar", "lumen", "orbit", "delta", "maple",
		"nova", "pixel", "quartz", "summit", "tidal", "vertex", "willow", "zenith", "harbor", "ember",
		"falcon", "granite", "ion", "juniper", "kestrel", "lotus", "meadow", "nimbus", "opal", "prairie"}
	genFirst = []string{"james", "mary", "john", "patricia", "robert", "jennifer", "michael", "linda", "david",
		"elizabeth", "william", "barbara", "richard", "susan", "joseph", "jessica", "thomas", "sarah", "chris",
		"karen", "daniel", "lisa", "matthew", "nancy", "anthony", "betty", "mark", "sandra", "paul", "ashley",
		"info", "sales", "admin", "contact", "support"}
	genLast = []string{"smith", "johnson", "williams", "brown", "jones", "garcia", "miller", "davis", "rodriguez",
		"martinez", "hernandez", "lopez", "gonzalez", "wilson", "anderson", "taylor", "moore", "jackson",
		"martin", "lee", "perez", "thompson", "white", "harris", "sanchez", "clark", "ramirez", "lewis"}
	genTTLs = []uint32{60, 300, 300, 300, 3600}
)

// Generate builds a world of n domains with a realistic mix of shapes and
// behaviours, and rows addresses over them, deterministically from seed.
//
// Mix (by domain): ~50% ordinary (1–2 MX, unknown users rejected), 12%
// catch-all, 15% hosted at one of four shared providers (one answers 452 to
// a second RCPT, one limits connections to 20), 5% NXDOMAIN, 1.5% null MX,
// 1.5% no address, 4% implicit MX, 3% greylisting (GenerateGreylist), 2%
// policy rejection, 0.5% each tarpit / drop at EHLO / drop at RCPT, 2.5%
// 452 on a second RCPT, 2% primary MX down. The first max(1, min(5, n/100))
// domains are large "freemail" providers (2–3 MX). Addresses are spread over
// domains with a Zipf-like law (rank^-0.9): ~72% existing mailboxes, ~22%
// unknown, ~4% full, ~2% disabled; ~2% have a capitalised local part, and
// duplicates occur naturally.
func Generate(seed int64, n, rows int) ([]Domain, []string) {
	rng := rand.New(rand.NewPCG(uint64(seed), uint64(seed)^0x9e3779b97f4a7c15))
	doms := make([]Domain, n)
	free := max(1, min(5, n/100))
	var total float64
	for _, k := range genKinds {
		total += k.weight
	}
	for i := range doms {
		d := &doms[i]
		d.TTL = genTTLs[rng.IntN(len(genTTLs))]
		if i < free {
			d.Name = fmt.Sprintf("freemail%d.test", i+1)
			d.MXHosts = 2
			if i == 0 {
				d.MXHosts = 3
			}
			continue
		}
		d.Name = fmt.Sprintf("%s-%s-%d.test", genWords[rng.IntN(len(genWords))], genWords[rng.IntN(len(genWords))], i)
		x := rng.Float64() * total
		for _, k := range genKinds {
			if x < k.weight {
				k.apply(d, rng)
				break
			}
			x -= k.weight
		}
	}

	return doms, genRows(rng, doms, rows, true)
}

func genLocal(rng *rand.Rand) string {
	f := genFirst[rng.IntN(len(genFirst))]
	l := genLast[rng.IntN(len(genLast))]
	switch rng.IntN(6) {
	case 0:
		return f + "." + l
	case 1:
		return f + l
	case 2:
		return f[:1] + "." + l
	case 3:
		return f + "_" + l
	case 4:
		return fmt.Sprintf("%s%d", f, rng.IntN(100))
	default:
		return fmt.Sprintf("%s.%s%d", f, l, rng.IntN(1000))
	}
}
