// SPDX-License-Identifier: Apache-2.0

package reshard

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// The issue's example: mesh (dp=2, tp=2), [StridedShard(0, 2), Shard(0)],
// shape [8, 3]: torch puts rows 4-5 on (0, 1) and rows 2-3 on (1, 0).
func TestStridedIssueExample(t *testing.T) {
	places := []Placement{StridedShard(0, 2), Shard(0)}
	rows := []int64{0, 4, 2, 6}
	for _, order := range []StridedOrder{StridedAuto, StridedDistribute, StridedFSDP2} {
		for i, row := range rows {
			coord := []int64{int64(i / 2), int64(i % 2)}
			local, boxes, err := DTensorLocalBoxes([]int64{8, 3}, []int64{2, 2}, places, order, coord)
			if err != nil {
				t.Fatalf("%v %v: %v", order, coord, err)
			}
			want := []LocalBox{{[]int64{row, 0}, []int64{2, 3}, []int64{0, 0}}}
			if !reflect.DeepEqual(local, []int64{2, 3}) || !reflect.DeepEqual(boxes, want) {
				t.Fatalf("%v %v: %v %v, want rows %d-%d", order, coord, local, boxes, row, row+1)
			}
		}
	}
}

func TestStridedSeveralBoxes(t *testing.T) {
	// [8, 3] over 2 with StridedShard(0, 2): rank 0 holds rows 0-1, 4-5
	local, boxes, err := NewMesh(0, 2).LocalBoxes([]int64{8, 3}, []Placement{StridedShard(0, 2)}, StridedDistribute, 0)
	want := []LocalBox{
		{[]int64{0, 0}, []int64{2, 3}, []int64{0, 0}},
		{[]int64{4, 0}, []int64{2, 3}, []int64{2, 0}},
	}
	if err != nil || !reflect.DeepEqual(local, []int64{4, 3}) || !reflect.DeepEqual(boxes, want) {
		t.Fatalf("%v %v %v", local, boxes, err)
	}
}

// [7, 2] on (3, 2): row 6 sits on (2, 0) in distribute_tensor's order and
// on (2, 1) in FSDP2's; StridedAuto refuses.
func TestStridedUnevenOrders(t *testing.T) {
	shape, mesh := []int64{7, 2}, []int64{3, 2}
	places := []Placement{StridedShard(0, 2), Shard(0)}
	for _, c := range []struct {
		order StridedOrder
		coord []int64
		n     int
	}{
		{StridedDistribute, []int64{2, 0}, 1}, {StridedDistribute, []int64{2, 1}, 0},
		{StridedFSDP2, []int64{2, 0}, 0}, {StridedFSDP2, []int64{2, 1}, 1},
	} {
		local, boxes, err := DTensorLocalBoxes(shape, mesh, places, c.order, c.coord)
		if err != nil || len(boxes) != c.n {
			t.Fatalf("%v %v: %v %v %v", c.order, c.coord, local, boxes, err)
		}
		if c.n == 1 && boxes[0].Offset[0] != 6 {
			t.Fatalf("%v %v: %v", c.order, c.coord, boxes)
		}
		if c.n == 0 && local[0] != 0 {
			t.Fatalf("%v %v: local shape %v", c.order, c.coord, local)
		}
	}
	_, _, err := DTensorLocalBoxes(shape, mesh, places, StridedAuto, []int64{0, 0})
	if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "RS_STRIDED_FSDP2") {
		t.Fatalf("auto: %v", err)
	}
}

func TestStridedLayout(t *testing.T) {
	ctx, err := NewLocalContext(6)
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Close()
	newLayout := func(rows int64) *Layout {
		l, err := ctx.NewLayout()
		if err != nil {
			t.Fatal(err)
		}
		if err := l.AddTensor("w", F32, []int64{rows, 3}); err != nil {
			t.Fatal(err)
		}
		return l
	}
	// several boxes: shards of one buffer with the local tensor's strides
	got, want := newLayout(8), newLayout(8)
	if err := got.AddDTensorStrided("w", Mesh{Shape: []int64{2}, Ranks: []int{3, 1}},
		[]Placement{StridedShard(0, 2)}, StridedDistribute, 2, 100); err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		rank     int
		row, off int64
	}{{3, 0, 100}, {3, 4, 124}, {1, 2, 100}, {1, 6, 124}} {
		if err := want.AddShard("w", s.rank, []int64{s.row, 0}, []int64{2, 3}, 2, s.off, []int64{3, 1}); err != nil {
			t.Fatal(err)
		}
	}
	a, _ := got.Serialize()
	b, _ := want.Serialize()
	if !bytes.Equal(a, b) {
		t.Fatal("the strided layout holds other shards than AddShard's")
	}
	// AddDTensor takes a StridedShard in the auto order, and refuses an
	// uneven one, leaving the layout as it was
	l := newLayout(8)
	places := []Placement{StridedShard(0, 2), Shard(0)}
	if err := l.AddDTensor("w", NewMesh(0, 2, 2), places, 0, 0); err != nil {
		t.Fatal(err)
	}
	if n, _ := l.NumShards(); n != 4 {
		t.Fatalf("%d shards", n)
	}
	u := newLayout(7)
	if err := u.AddDTensor("w", NewMesh(0, 3, 2), places, 0, 0); !errors.Is(err, ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "'w'") {
		t.Fatalf("uneven, auto: %v", err)
	}
	if n, _ := u.NumShards(); n != 0 {
		t.Fatalf("a refused call added %d shards", n)
	}
	if err := u.AddDTensorStrided("w", NewMesh(0, 3, 2), places, StridedFSDP2, 0, 0); err != nil {
		t.Fatal(err)
	}
	if n, _ := u.NumShards(); n != 5 {
		t.Fatalf("%d shards", n)
	}
}

func TestStridedBadInput(t *testing.T) {
	ctx, err := NewLocalContext(4)
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Close()
	l, _ := ctx.NewLayout()
	if err := l.AddTensor("w", F32, []int64{8}); err != nil {
		t.Fatal(err)
	}
	m := NewMesh(0, 2)
	for _, c := range []struct {
		err  error
		want error
	}{
		{l.AddDTensorStrided("w", m, []Placement{StridedShard(0, 2)}, StridedFSDP2, 0, 0), ErrUnsupported},
		{l.AddDTensorStrided("w", m, []Placement{StridedShard(0, 2)}, StridedAuto, 0, 0), ErrInvalidArgument},
		{l.AddDTensorStrided("w", m, []Placement{StridedShard(0, 0)}, StridedDistribute, 0, 0), ErrInvalidArgument},
		{l.AddDTensorStrided("w", m, []Placement{StridedShard(0, 2)}, StridedOrder(9), 0, 0), ErrInvalidArgument},
		{l.AddDTensorStrided("w", m, []Placement{StridedShard(1, 2)}, StridedDistribute, 0, 0), ErrInvalidArgument},
		{l.AddDTensorStrided("w", m, []Placement{StridedShard(-1, 2)}, StridedDistribute, 0, 0), ErrInvalidArgument},
		{l.AddDTensorStrided("ghost", m, []Placement{StridedShard(0, 2)}, StridedDistribute, 0, 0), ErrUnknownTensor},
	} {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%v, want %v", c.err, c.want)
		}
	}
	if n, _ := l.NumShards(); n != 0 {
		t.Fatalf("refused calls added %d shards", n)
	}
	if _, _, err := DTensorLocalBox([]int64{8}, []int64{2}, []Placement{StridedShard(0, 2)}, []int64{0}); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("DTensorLocalBox with a StridedShard: %v", err)
	}
}

func TestPlacementValues(t *testing.T) {
	p := StridedShard(1, 4)
	if !p.IsShard() || !p.IsStrided() || p.Dim() != 1 || p.SplitFactor() != 4 || p.String() != "StridedShard(1, 4)" {
		t.Fatalf("%v", p)
	}
	if StridedShard(2, 1) != Shard(2) || Shard(2).IsStrided() || Shard(2).SplitFactor() != 1 {
		t.Fatal("StridedShard(d, 1) is Shard(d)")
	}
	if Replicate().IsShard() || Replicate().Dim() != -1 || Replicate().String() != "Replicate()" {
		t.Fatal("Replicate")
	}
	var zero Placement
	if zero != Shard(0) || StridedOrder(1).String() != "distribute" {
		t.Fatal("zero values")
	}
}
