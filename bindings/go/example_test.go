// SPDX-License-Identifier: Apache-2.0

package reshard_test

import (
	"fmt"
	"log"

	"libreshard.dev/reshard"
)

// Reshard a 6x9 float32 tensor from 2 ranks (rows split) to 3 ranks
// (columns split), every rank in this process.
func Example() {
	const rows, cols = 6, 9
	ctx, err := reshard.NewLocalContext(5)
	if err != nil {
		log.Fatal(err)
	}
	defer ctx.Close()
	ctx.SetDomainSize(2) // ranks {0,1} {2,3} {4}

	train := reshard.NewMesh(0, 2) // ranks 0, 1
	infer := reshard.NewMesh(2, 3) // ranks 2, 3, 4
	src, _ := ctx.NewLayout()
	defer src.Close()
	dst, _ := ctx.NewLayout()
	defer dst.Close()
	for _, l := range []*reshard.Layout{src, dst} {
		if err := l.AddTensor("w", reshard.F32, []int64{rows, cols}); err != nil {
			log.Fatal(err)
		}
	}
	src.AddDTensor("w", train, []reshard.Placement{reshard.Shard(0)}, 0, 0)
	dst.AddDTensor("w", infer, []reshard.Placement{reshard.Shard(1)}, 0, 0)

	plan, err := reshard.NewPlan(src, dst)
	if err != nil {
		log.Fatal(err)
	}
	defer plan.Close()

	// Buffers are C memory; the plan keeps those bound to it.
	for r, rank := range train.Ranks {
		b, _ := reshard.NewBuffer(rows / 2 * cols * 4)
		defer b.Close()
		w := reshard.View[float32](b)
		for i := range w {
			w[i] = float32((r*rows/2+i/cols)*100 + i%cols)
		}
		plan.Bind(reshard.Src, rank, 0, b)
	}
	out := make([]*reshard.Buffer, len(infer.Ranks))
	for r, rank := range infer.Ranks {
		out[r], _ = reshard.NewBuffer(rows * cols / 3 * 4)
		defer out[r].Close()
		plan.Bind(reshard.Dst, rank, 0, out[r])
	}
	if err := plan.Execute(); err != nil {
		log.Fatal(err)
	}
	st, _ := plan.Stats(reshard.AllRanks)
	fmt.Println("rank 3, row 5:", reshard.View[float32](out[1])[5*3:6*3])
	fmt.Println("bytes across domains:", st.BytesSentInter, "rounds:", st.Rounds)
	// Output:
	// rank 3, row 5: [503 504 505]
	// bytes across domains: 216 rounds: 1
}
