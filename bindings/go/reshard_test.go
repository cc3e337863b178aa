// SPDX-License-Identifier: Apache-2.0

package reshard

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// quick is the quickstart of the C README: a 6x9 f32 tensor from 2 ranks
// (rows split) to 3 ranks (columns split), in a context of 5 ranks.
type quick struct {
	ctx      *Context
	src, dst *Layout
	plan     *Plan
	in, out  []*Buffer
}

const rows, cols = 6, 9

func newQuick(t *testing.T) *quick {
	t.Helper()
	q := &quick{}
	var err error
	must := func(e error) {
		t.Helper()
		if e != nil {
			t.Fatal(e)
		}
	}
	q.ctx, err = NewLocalContext(5)
	must(err)
	must(q.ctx.SetDomainSize(2))
	q.src, err = q.ctx.NewLayout()
	must(err)
	q.dst, err = q.ctx.NewLayout()
	must(err)
	shape := []int64{rows, cols}
	must(q.src.AddTensor("w", F32, shape))
	must(q.dst.AddTensor("w", F32, shape))
	must(q.src.AddDTensor("w", NewMesh(0, 2), []Placement{Shard(0)}, 0, 0))
	must(q.dst.AddDTensor("w", NewMesh(2, 3), []Placement{Shard(1)}, 0, 0))
	q.plan, err = NewPlan(q.src, q.dst)
	must(err)
	for r := 0; r < 2; r++ {
		b, err := NewBuffer(rows / 2 * cols * 4)
		must(err)
		must(q.plan.Bind(Src, r, 0, b))
		q.in = append(q.in, b)
	}
	for r := 0; r < 3; r++ {
		b, err := NewBuffer(rows * cols / 3 * 4)
		must(err)
		must(q.plan.Bind(Dst, 2+r, 0, b))
		q.out = append(q.out, b)
	}
	return q
}

// fill writes element (i, j) of generation gen into the sources.
func (q *quick) fill(gen int) {
	for r, b := range q.in {
		v := View[float32](b)
		for i := 0; i < rows/2; i++ {
			for j := 0; j < cols; j++ {
				v[i*cols+j] = float32(gen*1000 + (r*rows/2+i)*100 + j)
			}
		}
	}
}

func (q *quick) check(t *testing.T, gen int) {
	t.Helper()
	for r, b := range q.out {
		v := View[float32](b)
		for i := 0; i < rows; i++ {
			for j := 0; j < cols/3; j++ {
				want := float32(gen*1000 + i*100 + r*3 + j)
				if got := v[i*(cols/3)+j]; got != want {
					t.Fatalf("rank %d element (%d, %d): %v, want %v", 2+r, i, j+3*r, got, want)
				}
			}
		}
	}
}

func (q *quick) closeAll() {
	q.plan.Close()
	q.src.Close()
	q.dst.Close()
	q.ctx.Close()
	for _, b := range append(q.in, q.out...) {
		b.Close()
	}
}

func TestQuickstart(t *testing.T) {
	q := newQuick(t)
	defer q.closeAll()
	if q.ctx.WorldSize() != 5 || q.ctx.Rank() != AllRanks || q.ctx.Transport() != TransportLocal {
		t.Fatalf("context: world %d rank %d transport %v", q.ctx.WorldSize(), q.ctx.Rank(), q.ctx.Transport())
	}
	for gen := 1; gen <= 3; gen++ {
		q.fill(gen)
		if err := q.plan.Execute(); err != nil {
			t.Fatal(err)
		}
		q.check(t, gen)
	}
	st, err := q.plan.Stats(AllRanks)
	if err != nil {
		t.Fatal(err)
	}
	if st.Rounds < 1 || st.Moves < 1 || st.BytesSentInter+st.BytesSentIntra+st.BytesLocal < rows*cols*4 {
		t.Fatalf("stats %+v", st)
	}
	js, err := q.plan.JSON()
	if err != nil || !strings.HasPrefix(strings.TrimSpace(js), "{") || !strings.Contains(js, `"w"`) {
		t.Fatalf("JSON %q, %v", js, err)
	}
	if n, err := q.plan.NumTensors(); err != nil || n != 1 {
		t.Fatalf("NumTensors %d, %v", n, err)
	}
	if n, err := q.plan.NumMoves(); err != nil || n != st.Moves/2 && n < 1 {
		t.Fatalf("NumMoves %d, %v", n, err)
	}
	if d, err := q.ctx.Domain(4); err != nil || d != 2 {
		t.Fatalf("Domain(4) = %d, %v", d, err)
	}
	if Version() == "" || F32.Size() != 4 || BF16.String() != "bf16" || StatusTimeout.String() != "RS_ERR_TIMEOUT" {
		t.Fatal("version, dtype or status names")
	}
}

// A plan's part (ParamPlanPart) holds that rank's moves only, with every
// rank's figures; in process it is for inspection, not execution.
func TestPlanPart(t *testing.T) {
	q := newQuick(t)
	defer q.closeAll()
	whole, err := q.plan.Stats(AllRanks)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for rank := 0; rank < 5; rank++ {
		if err := q.ctx.SetParam(ParamPlanPart, int64(rank)); err != nil {
			t.Fatal(err)
		}
		part, err := NewPlan(q.src, q.dst)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := part.NumMoves()
		mine, _ := q.plan.Stat(rank, StatMoves)
		got, _ := part.Stats(AllRanks)
		if got != whole {
			t.Fatalf("part %d: figures %+v, whole plan %+v", rank, got, whole)
		}
		if js, _ := part.JSON(); !strings.Contains(js, fmt.Sprintf(`"part":%d`, rank)) {
			t.Fatalf("part %d: JSON does not say whose part it is", rank)
		}
		if n > mine {
			t.Fatalf("part %d: %d moves, the rank takes part in %d", rank, n, mine)
		}
		sum += n
		if err := part.Execute(); !errors.Is(err, ErrUnsupported) {
			t.Fatalf("part %d executed in process: %v", rank, err)
		}
		part.Close()
	}
	if n, _ := q.plan.NumMoves(); sum < n {
		t.Fatalf("the parts hold %d moves, the whole plan %d", sum, n)
	}
	if err := q.ctx.SetParam(ParamPlanPart, 5); err != nil {
		t.Fatal(err)
	}
	if _, err := NewPlan(q.src, q.dst); !errors.Is(err, ErrUnknownRank) {
		t.Fatalf("the part of rank 5 of 5: %v", err)
	}
}

// ParamRounds: packed by default; by domain pair gives a plan of another
// fingerprint that moves the same bytes between ranks.
func TestRoundsParam(t *testing.T) {
	q := newQuick(t)
	defer q.closeAll()
	if v, err := q.ctx.Param(ParamRounds); err != nil || Rounds(v) != RoundsPacked {
		t.Fatalf("default rounds %d, %v", v, err)
	}
	if err := q.ctx.SetParam(ParamRounds, int64(RoundsByDomainPair)); err != nil {
		t.Fatal(err)
	}
	paired, err := NewPlan(q.src, q.dst)
	if err != nil {
		t.Fatal(err)
	}
	defer paired.Close()
	a, _ := q.plan.Fingerprint()
	b, _ := paired.Fingerprint()
	if a == b {
		t.Fatalf("rounds by domain pair: the packed plan's fingerprint")
	}
	for _, s := range []Stat{StatBytesSentIntra, StatBytesSentInter, StatBytesLocal} {
		x, _ := q.plan.Stat(AllRanks, s)
		y, _ := paired.Stat(AllRanks, s)
		if x != y {
			t.Fatalf("figure %d: %d packed, %d by domain pair", s, x, y)
		}
	}
	if err := q.ctx.SetParam(ParamRounds, 2); !errors.Is(err, ErrBadParam) {
		t.Fatalf("rounds 2: %v", err)
	}
}

// ParamCopyThreads: 1 by default, 0 (one a CPU) accepted, 257 refused
// with the setting kept.
func TestCopyThreadsParam(t *testing.T) {
	q := newQuick(t)
	defer q.closeAll()
	if v, err := q.ctx.Param(ParamCopyThreads); err != nil || v != 1 {
		t.Fatalf("default copy threads %d, %v", v, err)
	}
	if err := q.ctx.SetParam(ParamCopyThreads, 0); err != nil {
		t.Fatal(err)
	}
	if err := q.ctx.SetParam(ParamCopyThreads, 257); !errors.Is(err, ErrBadParam) {
		t.Fatalf("257 copy threads: %v", err)
	}
	if v, _ := q.ctx.Param(ParamCopyThreads); v != 0 {
		t.Fatalf("copy threads %d after a refused set", v)
	}
	if err := q.plan.Execute(); err != nil {
		t.Fatal(err)
	}
}

// ParamProgressThread: 0 by default, 2 refused, 1 taken; ExecuteAsync
// then Wait delivers as before.
func TestProgressThreadParam(t *testing.T) {
	q := newQuick(t)
	defer q.closeAll()
	if v, err := q.ctx.Param(ParamProgressThread); err != nil || v != 0 {
		t.Fatalf("default progress thread %d, %v", v, err)
	}
	if err := q.ctx.SetParam(ParamProgressThread, 2); !errors.Is(err, ErrBadParam) {
		t.Fatalf("progress thread 2: %v", err)
	}
	if err := q.ctx.SetParam(ParamProgressThread, 1); err != nil {
		t.Fatal(err)
	}
	if err := q.plan.ExecuteAsync(0); err != nil {
		t.Fatal(err)
	}
	if err := q.plan.Wait(); err != nil {
		t.Fatal(err)
	}
}

// A plan made without boxes (ParamPlanBoxes 0) has the same figures and
// fingerprint, no box in its JSON, and is for inspection, not execution.
func TestPlanWithoutBoxes(t *testing.T) {
	q := newQuick(t)
	defer q.closeAll()
	if err := q.ctx.SetParam(ParamPlanBoxes, 0); err != nil {
		t.Fatal(err)
	}
	bare, err := NewPlan(q.src, q.dst)
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close()
	if err := q.ctx.SetParam(ParamPlanBoxes, 1); err != nil {
		t.Fatal(err)
	}
	whole, _ := q.plan.Stats(AllRanks)
	got, _ := bare.Stats(AllRanks)
	f1, _ := q.plan.Fingerprint()
	f2, _ := bare.Fingerprint()
	n1, _ := q.plan.NumMoves()
	n2, _ := bare.NumMoves()
	if got != whole || f1 != f2 || n1 != n2 {
		t.Fatalf("without boxes: figures %+v, %d moves, fingerprint %x; with: %+v, %d, %x",
			got, n2, f2, whole, n1, f1)
	}
	js, _ := bare.JSON()
	if !strings.Contains(js, `"boxes":false`) || strings.Contains(js, `"offset"`) {
		t.Fatalf("JSON of a plan without boxes: %.200s", js)
	}
	if err := bare.Execute(); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("a plan without boxes executed: %v", err)
	}
}

func TestErrors(t *testing.T) {
	// A failure without a context: rs_last_error's message.
	_, err := NewLocalContext(0)
	var re *Error
	if !errors.As(err, &re) || re.Status != StatusInvalidArgument ||
		re.Name != "RS_ERR_INVALID_ARGUMENT" || re.Message == "" || re.Op != "NewLocalContext" {
		t.Fatalf("NewLocalContext(0): %#v", err)
	}
	if !errors.Is(err, ErrInvalidArgument) || errors.Is(err, ErrTimeout) {
		t.Fatal("errors.Is compares the status")
	}
	if !strings.Contains(err.Error(), "RS_ERR_INVALID_ARGUMENT") || !strings.Contains(err.Error(), re.Message) {
		t.Fatalf("Error() = %q", err.Error())
	}

	ctx, err := NewLocalContext(4)
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Close()
	l, _ := ctx.NewLayout()
	defer l.Close()
	if err := l.AddTensor("w", F32, []int64{4, 4}); err != nil {
		t.Fatal(err)
	}
	// The message of the context, naming the offending value.
	err = l.AddTensor("w", F32, []int64{4})
	if !errors.As(err, &re) || re.Status != StatusDuplicateName || !strings.Contains(re.Message, "w") {
		t.Fatalf("duplicate name: %v", err)
	}
	wrapped := fmt.Errorf("loading: %w", err)
	if !errors.Is(wrapped, ErrDuplicateName) || !errors.As(wrapped, &re) {
		t.Fatal("a wrapped *Error is still found")
	}
	cases := []struct {
		err  error
		want *Error
	}{
		{l.AddTensor("", F32, []int64{1}), ErrInvalidArgument},
		{l.AddTensor("x", DType(99), []int64{1}), ErrInvalidArgument},
		{l.AddTensor("x", F32, []int64{0}), ErrBadShape},
		{l.AddTensor("x", F32, make([]int64, 17)), ErrTooManyDims},
		{l.AddTensor("a\x00b", F32, []int64{1}), ErrInvalidArgument},
		{l.AddShard("nope", 0, []int64{0}, []int64{1}, 0, 0, nil), ErrUnknownTensor},
		{l.AddShard("w", 9, []int64{0, 0}, []int64{1, 1}, 0, 0, nil), ErrUnknownRank},
		{l.AddShard("w", 0, []int64{3, 0}, []int64{2, 1}, 0, 0, nil), ErrOutOfBounds},
		{l.AddShard("w", 0, []int64{0}, []int64{1}, 0, 0, nil), ErrInvalidArgument},    // too short
		{l.AddShard("w", 0, []int64{0, 0}, []int64{1}, 0, 0, nil), ErrInvalidArgument}, // lengths
		{l.AddShard("w", 1<<40, []int64{0, 0}, []int64{1, 1}, 0, 0, nil), ErrInvalidArgument},
		{l.AddShard("w", 0, []int64{0, 0}, []int64{1, 1}, 0, -1, nil), ErrInvalidArgument},
		{l.AddDTensor("w", Mesh{Shape: []int64{2}, Ranks: []int{0}}, []Placement{Shard(0)}, 0, 0), ErrInvalidArgument},
		{l.AddDTensor("w", NewMesh(0, 2), []Placement{Shard(5)}, 0, 0), ErrInvalidArgument},
		{l.AddDTensor("w", NewMesh(0, 2), []Placement{Shard(-3)}, 0, 0), ErrInvalidArgument},
		{ctx.SetParam(ParamStagingBytes, 1), ErrBadParam},
		{ctx.SetParam(Param(12345), 1), ErrBadParam},
		{ctx.SetDomain(7, 0), ErrUnknownRank},
		{l.Allgather(), ErrUnsupported},
		{l.Deserialize([]byte("not a layout")), ErrCorrupt},
	}
	for i, c := range cases {
		if !errors.As(c.err, &re) || !errors.Is(c.err, c.want) || re.Message == "" {
			t.Errorf("case %d: %v, want %v", i, c.err, c.want)
		}
	}

	// A destination element no source holds.
	dst, _ := ctx.NewLayout()
	defer dst.Close()
	dst.AddTensor("w", F32, []int64{4, 4})
	dst.AddShard("w", 1, []int64{0, 0}, []int64{4, 4}, 0, 0, nil)
	l.AddShard("w", 0, []int64{0, 0}, []int64{2, 4}, 0, 0, nil)
	_, err = NewPlan(l, dst)
	if !errors.Is(err, ErrNotCovered) || !errors.As(err, &re) || !strings.Contains(re.Message, "w") {
		t.Fatalf("not covered: %v", err)
	}
	// Layouts of two contexts.
	other, _ := NewLocalContext(4)
	defer other.Close()
	ol, _ := other.NewLayout()
	defer ol.Close()
	if _, err := NewPlan(l, ol); !errors.Is(err, ErrWrongContext) {
		t.Fatalf("two contexts: %v", err)
	}
	// Executing before binding.
	l.AddShard("w", 0, []int64{2, 0}, []int64{2, 4}, 0, 0, nil)
	p, err := NewPlan(l, dst)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Execute(); !errors.Is(err, ErrUnknownBuffer) {
		t.Fatalf("unbound: %v", err)
	}
	small, _ := NewBuffer(8)
	defer small.Close()
	if err := p.Bind(Src, 0, 0, small); !errors.Is(err, ErrBufferTooSmall) {
		t.Fatalf("small: %v", err)
	}
	if err := p.Bind(Src, 0, 7, small); !errors.Is(err, ErrUnknownBuffer) {
		t.Fatalf("buffer 7: %v", err)
	}
	if err := p.Bind(Side(5), 0, 0, small); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("side 5: %v", err)
	}
	if err := p.BindAddress(Src, 0, 0, small.Address(), small.Len(), MemoryCUDA, 0); !errors.Is(err, ErrWrongMemory) {
		t.Fatalf("CUDA memory on a host context: %v", err)
	}
	if _, err := p.Stat(9, StatMoves); !errors.Is(err, ErrUnknownRank) {
		t.Fatalf("Stat(9): %v", err)
	}
	if _, err := p.Stats(9); !errors.Is(err, ErrUnknownRank) {
		t.Fatalf("Stats(9): %v", err)
	}
	if _, err := p.Stat(0, Stat(99)); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Stat(99): %v", err)
	}
	if err := p.ExecuteAsync(1); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("a queue on a host context: %v", err)
	}

	// Closed objects.
	l2, _ := ctx.NewLayout()
	l2.Close()
	err = l2.AddTensor("w", F32, []int64{1})
	if !errors.Is(err, ErrClosed) || !errors.Is(err, ErrNullPointer) || !errors.As(err, &re) {
		t.Fatalf("closed layout: %v", err)
	}
	b, _ := NewBuffer(4)
	b.Close()
	if b.Bytes() != nil || View[float32](b) != nil || b.Address() != 0 {
		t.Fatal("a closed buffer has no memory")
	}
	if err := p.Bind(Src, 0, 0, b); !errors.Is(err, ErrClosed) {
		t.Fatalf("binding a closed buffer: %v", err)
	}
	if _, err := b.Float(F32, 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed buffer: %v", err)
	}
	if _, err := NewBuffer(-1); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("NewBuffer(-1): %v", err)
	}
}

func TestInt64Exact(t *testing.T) {
	const big = int64(1)<<53 + 1 // not a float64
	ctx, err := NewLocalContext(2)
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Close()
	src, _ := ctx.NewLayout()
	defer src.Close()
	dst, _ := ctx.NewLayout()
	defer dst.Close()
	for _, l := range []*Layout{src, dst} {
		if err := l.AddTensor("huge", U8, []int64{big, 3}); err != nil {
			t.Fatal(err)
		}
	}
	if err := src.AddShard("huge", 0, []int64{0, 0}, []int64{big, 3}, 0, 0, nil); err != nil {
		t.Fatal(err)
	}
	if err := dst.AddShard("huge", 1, []int64{big - 1, 1}, []int64{1, 2}, 3, big, nil); err != nil {
		t.Fatal(err)
	}
	p, err := NewPlan(src, dst)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	js, err := p.JSON()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(js, fmt.Sprint(big-1)) || !strings.Contains(js, fmt.Sprint(big)) {
		t.Fatalf("the JSON lacks %d and %d: %s", big-1, big, js)
	}
	if st, err := p.Stats(1); err != nil || st.BytesRecvIntra+st.BytesRecvInter+st.BytesLocal != 2 {
		t.Fatalf("stats of rank 1: %+v, %v", st, err)
	}
	p2, _ := NewPlan(src, dst)
	defer p2.Close()
	f1, err1 := p.Fingerprint()
	f2, err2 := p2.Fingerprint()
	if err1 != nil || err2 != nil || f1 != f2 || f1 == 0 {
		t.Fatalf("fingerprints %x %x (%v %v)", f1, f2, err1, err2)
	}

	// DTensor boxes of a tensor beyond 2^53: chunk ceil(big/2).
	off, ext, err := DTensorLocalBox([]int64{big}, []int64{2}, []Placement{Shard(0)}, []int64{1})
	if err != nil || off[0] != big/2+1 || ext[0] != big/2 {
		t.Fatalf("DTensorLocalBox: %v %v %v", off, ext, err)
	}
	m := Mesh{Shape: []int64{2, 2}, Ranks: []int{3, 2, 1, 0}}
	off, ext, err = m.LocalBox([]int64{big, 4}, []Placement{Shard(0), Shard(1)}, 1)
	if err != nil || off[0] != big/2+1 || ext[0] != big/2 || off[1] != 0 || ext[1] != 2 {
		t.Fatalf("Mesh.LocalBox: %v %v %v", off, ext, err)
	}

	// Parameters and elements, all 64 bits.
	if err := ctx.SetParam(ParamStagingBytes, 1<<40); err != nil {
		t.Fatal(err)
	}
	if v, err := ctx.Param(ParamStagingBytes); err != nil || v != 1<<40 {
		t.Fatalf("staging %d, %v", v, err)
	}
	b, _ := NewBuffer(16)
	defer b.Close()
	for _, v := range []int64{math.MaxInt64, math.MinInt64, big, -big} {
		if err := b.SetInt(I64, 1, v); err != nil {
			t.Fatal(err)
		}
		if got, err := b.Int(I64, 1); err != nil || got != v || View[int64](b)[1] != v {
			t.Fatalf("i64 %d read back as %d (%v)", v, got, err)
		}
	}
	b.SetInt(U64, 0, -1)
	if View[uint64](b)[0] != math.MaxUint64 {
		t.Fatal("u64 bit pattern")
	}
	if _, err := b.Int(I64, 2); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("element 2 of 2: %v", err)
	}
	if err := b.SetFloat(BF16, 0, 1.00390625); err != nil { // 1 + 2^-8: a tie, to even
		t.Fatal(err)
	}
	if v, _ := b.Float(BF16, 0); v != 1 {
		t.Fatalf("bf16 rounding: %v", v)
	}
	if _, err := b.Float(I32, 0); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("an integer dtype read as float: %v", err)
	}
}

// liveCounts reads how many C objects the package holds.
func liveCounts() [4]int64 {
	return [4]int64{live.contexts.Load(), live.layouts.Load(), live.plans.Load(), live.buffers.Load()}
}

// waitLive collects garbage until the counts are want (finalizers close on
// goroutines of their own).
func waitLive(t *testing.T, want [4]int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		runtime.GC()
		got := liveCounts()
		if got == want {
			return
		}
		for i := range got {
			if got[i] < want[i] {
				t.Fatalf("freed twice: %v live, want %v", got, want)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v live, want %v", got, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Every order of closing the context, the layouts, the plan and the
// buffers works, and executing after the context (or a bound buffer) is
// closed still works.
func TestCloseOrders(t *testing.T) {
	base := liveCounts()
	perms := permutations([]int{0, 1, 2, 3, 4})
	for n, perm := range perms {
		q := newQuick(t)
		buffersClosed := false
		for _, what := range perm {
			switch what {
			case 0:
				q.ctx.Close()
			case 1:
				q.src.Close()
			case 2:
				q.dst.Close()
			case 3:
				q.plan.Close()
			case 4:
				for _, b := range append(q.in, q.out...) {
					b.Close()
				}
				buffersClosed = true
			}
			if what != 3 && q.plan.h != nil && n%7 == 0 {
				// The plan still runs on what it kept.
				if !buffersClosed {
					q.fill(n)
				}
				if err := q.plan.Execute(); err != nil {
					t.Fatalf("order %v after %d: %v", perm, what, err)
				}
				if !buffersClosed {
					q.check(t, n)
				}
			}
		}
		q.closeAll() // twice: nothing
		if got := liveCounts(); got != base {
			t.Fatalf("order %v: %v live, want %v", perm, got, base)
		}
	}
}

func permutations(xs []int) [][]int {
	if len(xs) <= 1 {
		return [][]int{append([]int(nil), xs...)}
	}
	var out [][]int
	for i := range xs {
		rest := append(append([]int(nil), xs[:i]...), xs[i+1:]...)
		for _, p := range permutations(rest) {
			out = append(out, append([]int{xs[i]}, p...))
		}
	}
	return out
}

// A buffer closed while bound keeps its memory until the plan lets go.
func TestBufferPinnedByPlan(t *testing.T) {
	base := liveCounts()
	q := newQuick(t)
	addr := q.out[0].Address()
	q.out[0].Close()
	if got := liveCounts(); got[3] != base[3]+5 {
		t.Fatalf("a bound buffer was freed: %v", got)
	}
	q.fill(1)
	if err := q.plan.Execute(); err != nil {
		t.Fatal(err)
	}
	// Rebinding rank 2 lets the old buffer go.
	nb, _ := NewBuffer(q.out[1].Len())
	if err := q.plan.Bind(Dst, 2, 0, nb); err != nil {
		t.Fatal(err)
	}
	if got := liveCounts(); got[3] != base[3]+5 {
		t.Fatalf("after rebinding: %v live, want %d buffers", got, base[3]+5)
	}
	// Binding by address (C memory of a buffer) works too.
	if err := q.plan.BindAddress(Dst, 2, 0, nb.Address(), nb.Len(), MemoryHost, -1); err != nil {
		t.Fatal(err)
	}
	if err := q.plan.Execute(); err != nil {
		t.Fatal(err)
	}
	v := View[float32](nb)
	if v[0] != 1000 || v[1] != 1001 || addr == 0 {
		t.Fatalf("rank 2 got %v", v[:3])
	}
	nb.Close()
	q.closeAll()
	if got := liveCounts(); got != base {
		t.Fatalf("%v live, want %v", got, base)
	}
}

func TestBuffers(t *testing.T) {
	b, err := NewBuffer(100)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.Len() != 100 || len(b.Bytes()) != 100 || b.Address()%64 != 0 {
		t.Fatalf("len %d, address %x", b.Len(), b.Address())
	}
	for _, x := range b.Bytes() {
		if x != 0 {
			t.Fatal("not zeroed")
		}
	}
	b.Fill(0xab)
	if b.Bytes()[99] != 0xab || View[uint16](b)[0] != 0xabab || len(View[float64](b)) != 12 {
		t.Fatal("Fill or View")
	}
	copy(b.Bytes(), []byte{1, 2, 3, 4})
	if View[uint32](b)[0] != 0x04030201 {
		t.Fatal("little-endian view")
	}
	if err := b.SetFloat(F16, 3, 0.1); err != nil {
		t.Fatal(err)
	}
	if v, _ := b.Float(F16, 3); v != 0.0999755859375 {
		t.Fatalf("f16 of 0.1: %v", v)
	}
	if err := b.SetInt(I8, 99, -2); err != nil {
		t.Fatal(err)
	}
	if v, _ := b.Int(I8, 99); v != -2 || b.Bytes()[99] != 0xfe {
		t.Fatal("i8")
	}
	z, err := NewBuffer(0)
	if err != nil || len(z.Bytes()) != 0 || z.Bytes() == nil {
		t.Fatalf("an empty buffer: %v", err)
	}
	z.Close()
	b.Close()
	b.Close()
}

// Objects dropped without Close are freed by their finalizers, once each,
// and objects closed before are not freed again.
func TestFinalizers(t *testing.T) {
	for i := 0; i < 5; i++ { // what earlier tests dropped is freed first
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	base := liveCounts()
	func() {
		for i := 0; i < 20; i++ {
			q := newQuick(t)
			q.fill(i)
			if err := q.plan.Execute(); err != nil {
				t.Fatal(err)
			}
			if i%2 == 0 { // some closed, some not, some half
				q.closeAll()
			} else if i%3 == 0 {
				q.ctx.Close()
				q.in[0].Close()
			}
			if i%5 == 0 {
				q.plan.ExecuteAsync(0) // dropped while in flight: Close waits
			}
		}
	}()
	waitLive(t, base)
}

func TestAsync(t *testing.T) {
	q := newQuick(t)
	defer q.closeAll()
	for gen := 0; gen < 4; gen++ {
		q.fill(gen)
		if err := q.plan.ExecuteAsync(0); err != nil {
			t.Fatal(err)
		}
		if gen%2 == 0 {
			for spins := 0; ; spins++ {
				done, err := q.plan.Test()
				if err != nil {
					t.Fatal(err)
				}
				if done {
					break
				}
				if spins > 1e6 {
					t.Fatal("never done")
				}
				runtime.Gosched() // the caller's other work
			}
		} else if err := q.plan.Wait(); err != nil {
			t.Fatal(err)
		}
		q.check(t, gen)
	}
	// Nothing in flight: done at once, with the last status.
	if done, err := q.plan.Test(); !done || err != nil {
		t.Fatalf("Test with nothing in flight: %v %v", done, err)
	}
	if err := q.plan.Wait(); err != nil {
		t.Fatal(err)
	}
	// Close while in flight waits for the execution.
	q.fill(9)
	if err := q.plan.ExecuteAsync(0); err != nil {
		t.Fatal(err)
	}
	if err := q.plan.Close(); err != nil {
		t.Fatal(err)
	}
	q.check(t, 9)
	if err := q.plan.Execute(); !errors.Is(err, ErrClosed) {
		t.Fatalf("a closed plan: %v", err)
	}
}

// Abort makes the next execution fail with ErrTransport, and the context
// is done; from another goroutine it does not wait for the context's lock.
func TestAbort(t *testing.T) {
	q := newQuick(t)
	defer q.closeAll()
	q.fill(1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); q.ctx.Abort() }()
	wg.Wait()
	err := q.plan.Execute()
	if !errors.Is(err, ErrTransport) {
		t.Fatalf("after Abort: %v", err)
	}
	if err := q.plan.Execute(); !errors.Is(err, ErrTransport) {
		t.Fatalf("fail-stop: %v", err)
	}
	q.ctx.Close()
	q.ctx.Abort() // after Close: nothing
}

// Several goroutines share a context; the lock makes their calls one at a
// time.
func TestGoroutines(t *testing.T) {
	q := newQuick(t)
	defer q.closeAll()
	q.fill(5)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				var err error
				switch (g + i) % 4 {
				case 0:
					err = q.plan.Execute()
				case 1:
					_, err = q.plan.Stats(AllRanks)
				case 2:
					_, err = q.src.NumShards()
				case 3:
					_, err = q.ctx.Param(ParamTimeoutMS)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	q.check(t, 5)
}

func TestSerialize(t *testing.T) {
	q := newQuick(t)
	defer q.closeAll()
	data, err := q.src.Serialize()
	if err != nil || len(data) == 0 {
		t.Fatalf("Serialize: %d bytes, %v", len(data), err)
	}
	l, _ := q.ctx.NewLayout()
	defer l.Close()
	if err := l.Deserialize(data); err != nil {
		t.Fatal(err)
	}
	n, err1 := l.NumShards()
	m, err2 := q.src.NumShards()
	k, err3 := l.NumTensors()
	if err1 != nil || err2 != nil || err3 != nil || n != m || n != 2 || k != 1 {
		t.Fatalf("shards %d and %d, tensors %d", n, m, k)
	}
	// The deserialized layout plans like the original.
	p, err := NewPlan(l, q.dst)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	f1, _ := p.Fingerprint()
	f2, _ := q.plan.Fingerprint()
	if f1 != f2 {
		t.Fatalf("fingerprints %x and %x", f1, f2)
	}
}

func TestMesh(t *testing.T) {
	m := Mesh{Shape: []int64{2, 2}, Ranks: []int{0, 1, 2, 3}, Names: []string{"dp", "tp"}}
	p, err := m.Placements(map[string]Placement{"tp": Shard(1)})
	if err != nil || len(p) != 2 || p[0] != Replicate() || p[1] != Shard(1) || p[1].Dim() != 1 || p[0].IsShard() {
		t.Fatalf("placements %v, %v", p, err)
	}
	if p[0].String() != "Replicate()" || p[1].String() != "Shard(1)" {
		t.Fatal("placement names")
	}
	if _, err := m.Placements(map[string]Placement{"pp": Shard(0)}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("an unknown axis: %v", err)
	}
	if c, ok := m.Coord(2); !ok || c[0] != 1 || c[1] != 0 {
		t.Fatalf("Coord(2) = %v", c)
	}
	if _, ok := m.Coord(7); ok {
		t.Fatal("Coord(7)")
	}
	if n, err := m.LocalNumel([]int64{5, 6}, p, 3); err != nil || n != 15 {
		t.Fatalf("LocalNumel %d, %v", n, err)
	}
	if m.Size() != 4 || NewMesh(4, 4).Ranks[3] != 7 {
		t.Fatal("Size or NewMesh")
	}
	// Uneven, torch.chunk style: 5 rows over 4 ranks are 2, 2, 1, 0.
	var exts []int64
	for r := 0; r < 4; r++ {
		_, ext, err := NewMesh(0, 4).LocalBox([]int64{5}, []Placement{Shard(0)}, r)
		if err != nil {
			t.Fatal(err)
		}
		exts = append(exts, ext[0])
	}
	if fmt.Sprint(exts) != "[2 2 1 0]" {
		t.Fatalf("uneven extents %v", exts)
	}
}

// Without MPI initialized, or without a GPU, NCCL, or MPI, making such a
// context fails with an *Error (on a GPU machine the NCCL ones may work).
func TestOtherTransports(t *testing.T) {
	check := func(what string, c *Context, err error) {
		t.Helper()
		if err == nil {
			c.Close()
			return
		}
		var re *Error
		if !errors.As(err, &re) || re.Message == "" {
			t.Fatalf("%s: %#v", what, err)
		}
		t.Logf("%s: %v", what, err)
	}
	c, err := NewNCCLContextDevices([]int{0})
	check("NewNCCLContextDevices", c, err)
	c, err = NewNCCLContextFromComm(0)
	check("NewNCCLContextFromComm(0)", c, err)
	id, err := NCCLUniqueID()
	check("NCCLUniqueID", nil, err)
	if err == nil {
		if len(id) != NCCLUniqueIDBytes {
			t.Fatalf("id of %d bytes", len(id))
		}
		c, err = NewNCCLContextFromID(id, 0, 1, 0)
		check("NewNCCLContextFromID", c, err)
	}
	c, err = NewNCCLContextFromID(make([]byte, 3), 0, 1, 0)
	check("NewNCCLContextFromID (3 bytes)", c, err)
	if err == nil {
		t.Fatal("an id of 3 bytes was accepted")
	}
	if _, err := NewNCCLContextFromID(nil, 1<<33, 1, 0); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("rank 2^33: %v", err)
	}
	c, err = NewMPIContext(0)
	check("NewMPIContext", c, err)
}
