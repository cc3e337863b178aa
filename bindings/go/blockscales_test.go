// SPDX-License-Identifier: Apache-2.0

package reshard

// Changing dtype on the way: a bf16 source lands as block-scaled fp8
// (F8E4M3 values and f32 scales, Layout.SetBlockScales), checked against
// values computed by hand; and the errors of bad declarations.

import (
	"errors"
	"math"
	"strings"
	"testing"
)

const fpN, fpB = 256, 128 // a [256, 256] tensor in [2, 2] blocks of 128 x 128

// bf16 is the bf16 bit pattern of x, which must be exact in bf16.
func bf16(x float32) uint16 { return uint16(math.Float32bits(x) >> 16) }

// fp8Source is the source of the hand-computed cases: block [0, 0] all
// 448, [0, 1] all 1, [1, 0] all 0, and [1, 1] holds ±(j % 8) / 2 (minus
// in odd rows), whose amax 3.5 makes the scale 3.5/448 = 2^-7 under
// either rule, so that every quotient x * 128 is known.
func fp8Source(b *Buffer) {
	v := View[uint16](b)
	for i := 0; i < fpN; i++ {
		for j := 0; j < fpN; j++ {
			var x float32
			switch {
			case i < fpB && j < fpB:
				x = 448
			case i < fpB:
				x = 1
			case j < fpB:
				x = 0
			default:
				x = float32(j%8) / 2
				if i%2 == 1 && x != 0 { // no -0 (it would be 0x80)
					x = -x
				}
			}
			v[i*fpN+j] = bf16(x)
		}
	}
}

// e4m3 of (j % 8) * 64, the quotients of block [1, 1]: 0, 64, 128, 192,
// 256, 320, 384, 448.
var wantQuotients = [8]byte{0x00, 0x68, 0x70, 0x74, 0x78, 0x7a, 0x7c, 0x7e}

// runFP8 plans and executes on 2 in-process ranks: rank 0 holds the bf16
// source whole; rank 1 the fp8 destination (buffer 0) and its [2, 2]
// scales (buffer 1). It returns the fp8 bytes, the scales and the stats
// of rank 0 and rank 1.
func runFP8(t *testing.T, rule ScaleRule) ([]byte, []float32, [2]Stats) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	ctx, err := NewLocalContext(2)
	must(err)
	defer ctx.Close()
	src, err := ctx.NewLayout()
	must(err)
	defer src.Close()
	dst, err := ctx.NewLayout()
	must(err)
	defer dst.Close()
	must(src.AddTensor("w", BF16, []int64{fpN, fpN}))
	must(src.AddShard("w", 0, []int64{0, 0}, []int64{fpN, fpN}, 0, 0, nil))
	must(dst.AddTensor("w", F8E4M3, []int64{fpN, fpN}))
	must(dst.AddTensor("w_scale", F32, []int64{2, 2}))
	must(dst.SetBlockScales("w", "w_scale", fpB, fpB, rule))
	must(dst.AddShard("w", 1, []int64{0, 0}, []int64{fpN, fpN}, 0, 0, nil))
	must(dst.AddShard("w_scale", 1, []int64{0, 0}, []int64{2, 2}, 1, 0, nil))
	plan, err := NewPlan(src, dst)
	must(err)
	defer plan.Close()
	in, err := NewBuffer(fpN * fpN * 2)
	must(err)
	defer in.Close()
	out, err := NewBuffer(fpN * fpN)
	must(err)
	defer out.Close()
	scales, err := NewBuffer(4 * 4)
	must(err)
	defer scales.Close()
	fp8Source(in)
	out.Fill(0xa5) // none of the bytes it must become
	scales.Fill(0xff)
	must(plan.Bind(Src, 0, 0, in))
	must(plan.Bind(Dst, 1, 0, out))
	must(plan.Bind(Dst, 1, 1, scales))
	must(plan.Execute())
	var st [2]Stats
	for r := range st {
		st[r], err = plan.Stats(r)
		must(err)
	}
	return append([]byte(nil), out.Bytes()...),
		append([]float32(nil), View[float32](scales)...), st
}

func TestBlockScaledFP8(t *testing.T) {
	for _, rule := range []ScaleRule{ScaleAMAX, ScaleUE8M0} {
		t.Run(rule.String(), func(t *testing.T) {
			q, s, st := runFP8(t, rule)
			// block of 448: scale 1, bytes 0x7e; block of 1: scale 1/448
			// (amax) or 2^-8 (ue8m0), bytes 0x7e or 0x78 (256); zero
			// block: scale 1, bytes 0; block [1, 1]: scale 2^-7.
			ones, onesByte := float32(1)/float32(448), byte(0x7e)
			if rule == ScaleUE8M0 {
				ones, onesByte = 1.0/256, 0x78
			}
			want := []float32{1, ones, 1, 1.0 / 128}
			for k := range want {
				if math.Float32bits(s[k]) != math.Float32bits(want[k]) {
					t.Errorf("scale [%d, %d] is %g, want %g", k/2, k%2, s[k], want[k])
				}
			}
			bad := 0
			for i := 0; i < fpN; i++ {
				for j := 0; j < fpN; j++ {
					var w byte
					switch {
					case i < fpB && j < fpB:
						w = 0x7e
					case i < fpB:
						w = onesByte
					case j < fpB:
						w = 0
					default:
						w = wantQuotients[j%8]
						if i%2 == 1 && w != 0 {
							w |= 0x80
						}
					}
					if got := q[i*fpN+j]; got != w {
						if bad++; bad <= 5 {
							t.Errorf("fp8 byte [%d, %d] is %#02x, want %#02x", i, j, got, w)
						}
					}
				}
			}
			if bad > 5 {
				t.Errorf("... %d bytes differ in all", bad)
			}
			// Rank 0 holds every block whole: it converts before sending
			// (each element, and one per block for the scale).
			if st[0].ConvertedSending != fpN*fpN+4 || st[1].ConvertedReceiving != 0 {
				t.Errorf("converted: sending %d (rank 0), receiving %d (rank 1)",
					st[0].ConvertedSending, st[1].ConvertedReceiving)
			}
		})
	}
}

func TestBlockScalesErrors(t *testing.T) {
	ctx, err := NewLocalContext(2)
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Close()
	l, err := ctx.NewLayout()
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, d := range []struct {
		name  string
		dtype DType
		shape []int64
	}{{"w", F8E4M3, []int64{fpN, fpN}}, {"w_scale", F32, []int64{2, 2}},
		{"w_bf16", BF16, []int64{fpN, fpN}}} {
		if err := l.AddTensor(d.name, d.dtype, d.shape); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		err  error
		want *Error
		part string // in the message
	}{
		{l.SetBlockScales("nope", "w_scale", fpB, fpB, ScaleAMAX), ErrUnknownTensor, "nope"},
		{l.SetBlockScales("w", "nope", fpB, fpB, ScaleAMAX), ErrUnknownTensor, "nope"},
		{l.SetBlockScales("w_bf16", "w_scale", fpB, fpB, ScaleAMAX), ErrInvalidArgument, "w_bf16"},
		{l.SetBlockScales("w", "w_bf16", fpB, fpB, ScaleAMAX), ErrInvalidArgument, "w_bf16"},
		{l.SetBlockScales("w", "w_scale", 0, fpB, ScaleAMAX), ErrInvalidArgument, "w"},
		{l.SetBlockScales("w", "w_scale", 64, 64, ScaleUE8M0), ErrInvalidArgument, "w_scale"},
		{l.SetBlockScales("w", "w_scale", fpB, fpB, ScaleRule(7)), ErrInvalidArgument, "7"},
		{l.SetBlockScales("w", "w_scale", fpB, fpB, ScaleRule(1<<40)), ErrInvalidArgument, "rule"},
		{l.SetBlockScales("w\x00", "w_scale", fpB, fpB, ScaleAMAX), ErrInvalidArgument, "NUL"},
	}
	var re *Error
	for i, c := range cases {
		if !errors.As(c.err, &re) || !errors.Is(c.err, c.want) ||
			re.Name != c.want.Name || re.Op != "Layout.SetBlockScales" ||
			!strings.Contains(re.Message, c.part) {
			t.Errorf("case %d: %v, want %v naming %q", i, c.err, c.want, c.part)
		}
	}
	if err := l.SetBlockScales("w", "w_scale", fpB, fpB, ScaleAMAX); err != nil {
		t.Fatal(err)
	}
	if err := l.SetBlockScales("w", "w_scale", fpB, fpB, ScaleAMAX); err != nil {
		t.Fatalf("the same declaration again: %v", err)
	}
	if err := l.SetBlockScales("w", "w_scale", fpB, fpB, ScaleUE8M0); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("another rule for the same tensor: %v", err)
	}
	if ScaleAMAX.String() != "amax" || ScaleUE8M0.String() != "ue8m0" || ScaleRule(9).String() != "ScaleRule(9)" {
		t.Fatal("ScaleRule.String")
	}

	// A destination shard that cuts a block: the plan is refused.
	src, _ := ctx.NewLayout()
	defer src.Close()
	if err := src.AddTensor("w", BF16, []int64{fpN, fpN}); err != nil {
		t.Fatal(err)
	}
	if err := src.AddShard("w", 0, []int64{0, 0}, []int64{fpN, fpN}, 0, 0, nil); err != nil {
		t.Fatal(err)
	}
	dst, _ := ctx.NewLayout()
	defer dst.Close()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(dst.AddTensor("w", F8E4M3, []int64{fpN, fpN}))
	must(dst.AddTensor("w_scale", F32, []int64{2, 2}))
	must(dst.SetBlockScales("w", "w_scale", fpB, fpB, ScaleAMAX))
	must(dst.AddShard("w", 0, []int64{0, 0}, []int64{64, fpN}, 0, 0, nil))
	must(dst.AddShard("w", 1, []int64{64, 0}, []int64{fpN - 64, fpN}, 0, 0, nil))
	must(dst.AddShard("w_scale", 1, []int64{0, 0}, []int64{2, 2}, 1, 0, nil))
	_, err = NewPlan(src, dst)
	if !errors.As(err, &re) || !errors.Is(err, ErrUnsupported) || re.Name != "RS_ERR_UNSUPPORTED" ||
		!strings.Contains(re.Message, "cuts block") {
		t.Fatalf("a shard cutting a block: %v", err)
	}
}
