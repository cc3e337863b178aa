// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"
	"testing"
)

// The shared scenario: every element checked after each of two executions,
// and what crosses between the domains as planned.
func TestScenario(t *testing.T) {
	var out strings.Builder
	res, err := run(&out)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Checked) != 2 {
		t.Fatalf("%d executions", len(res.Checked))
	}
	// Every element of every inference rank: 4 ranks of a quarter of the
	// split weights, and every norm on each of them.
	var want int64
	for _, tn := range model() {
		n := int64(1)
		for _, s := range tn.shape {
			n *= s
		}
		if tn.split < 0 {
			n *= 4
		}
		want += n
	}
	for i := range res.Checked {
		if res.Checked[i] != want || res.Wrong[i] != 0 {
			t.Fatalf("execution %d: %d of %d elements checked, %d wrong",
				i+1, res.Checked[i], want, res.Wrong[i])
		}
	}
	// The trainers (domain 0) hold no inference rank (domain 1): each
	// destination byte crosses once at least, a replicated norm once per
	// domain and is forwarded inside it, and nothing is copied locally.
	all := res.All
	if all.BytesSentInter < res.DstSize-all.BytesSentIntra || all.BytesSentInter > res.DstSize ||
		all.BytesSentInter+all.BytesSentIntra != res.DstSize || all.BytesLocal != 0 {
		t.Fatalf("stats %+v for %d destination bytes", all, res.DstSize)
	}
	if all.BytesSentIntra == 0 {
		t.Fatalf("the norms are not forwarded inside the inference domain: %+v", all)
	}
	for _, line := range []string{"across domains", "execution 1: ", "execution 2: ", "bit-exact"} {
		if !strings.Contains(out.String(), line) {
			t.Fatalf("the output lacks %q", line)
		}
	}
}
