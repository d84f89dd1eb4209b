package bulk

import (
	"bytes"
	"io"
	"testing"
)

func TestBytesSameEachCall(t *testing.T) {
	a, b := Bytes(1<<10), Bytes(4<<10)
	if !bytes.Equal(a, b[:len(a)]) {
		t.Fatal("Bytes gave other bytes on another call")
	}
	if bytes.Count(b, b[:1]) > len(b)/16 {
		t.Fatalf("Bytes repeats its first byte %d times in %d", bytes.Count(b, b[:1]), len(b))
	}
}

func TestRepeat(t *testing.T) {
	block := Bytes(1000)
	got, err := io.ReadAll(io.LimitReader(Repeat(block), 2500))
	if err != nil {
		t.Fatal(err)
	}
	want := append(append(append([]byte{}, block...), block...), block[:500]...)
	if !bytes.Equal(got, want) {
		t.Fatal("Repeat did not give the block over and over")
	}
}
