package server

import "testing"

func TestFrameClasses(t *testing.T) {
	prev := -1
	for _, n := range []int{pooledFrameMin + 1, 1<<17 + 1, 1 << 20, 1<<20 + 1, 3 << 20, 100 << 20} {
		class, size, ok := frameClass(n)
		if !ok {
			t.Fatalf("%d bytes not pooled", n)
		}
		if size < n || size >= 2*n {
			t.Errorf("%d bytes in a class of %d", n, size)
		}
		if class <= prev {
			t.Errorf("%d bytes in class %d, after class %d", n, class, prev)
		}
		prev = class
		if c2, s2, _ := frameClass(size); c2 != class || s2 != size {
			t.Errorf("a frame of capacity %d goes back to class %d (%d), not %d (%d)", size, c2, s2, class, size)
		}
		f := produceFrame(n)
		if len(*f) != n || cap(*f) != size {
			t.Errorf("frame of %d: len %d cap %d, want cap %d", n, len(*f), cap(*f), size)
		}
		putFrame(f)
	}
	// Requests of 1 to 2 MiB share their frames: one class per power of two.
	above, _, _ := frameClass(1<<20 + 1)
	twice, _, _ := frameClass(2 << 20)
	if above != twice {
		t.Error("frames of 1 MiB + 1 and 2 MiB are in different classes")
	}
	if _, _, ok := frameClass(pooledFrameMin); ok || produceFrame(pooledFrameMin) != nil {
		t.Error("small frames pooled")
	}
}

// BenchmarkProduceFrame reads 1 MiB produce frames into a new buffer each
// time, as before frames were reused, and into reused ones, in one run.
func BenchmarkProduceFrame(b *testing.B) {
	const size = 1 << 20
	src := make([]byte, size)
	for _, reuse := range []bool{false, true} {
		b.Run(map[bool]string{false: "new", true: "reused"}[reuse], func(b *testing.B) {
			b.SetBytes(size)
			b.ReportAllocs()
			for range b.N {
				if reuse {
					f := produceFrame(size)
					copy(*f, src) // the read from the socket's buffer
					putFrame(f)
				} else {
					copy(make([]byte, size), src)
				}
			}
		})
	}
}
