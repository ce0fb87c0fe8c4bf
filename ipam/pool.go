package ipam

import "math/bits"

// The pool keeps the used offsets of one per-node pod subnet in a sparse,
// chunked bitmap: a chunk covers chunkSize consecutive offsets and exists
// only while at least one of them is in use (or it holds the cursor). Memory
// is therefore proportional to the number of allocations, not to the size of
// the subnet, which makes the same code work for an IPv4 /24 and for an IPv6
// slice with 64 or more host bits.
const (
	chunkShift = 12
	chunkSize  = 1 << chunkShift
	chunkWords = chunkSize / 64
)

type chunk struct {
	used  int // number of set bits
	words [chunkWords]uint64
}

// pool allocates offsets in [lo, hi] next-after-last: the search for a free
// offset starts right after the last allocated one and wraps around, so a
// released offset is handed out again only after the cursor has passed the
// end of the range.
//
// Cost: allocation inspects one map entry per chunk and at most chunkWords
// words per chunk it scans; full chunks are skipped in O(1), absent chunks
// are free. Sequential allocation is O(1) amortised.
//
// pool is not safe for concurrent use; IPAM guards it with its lock.
type pool struct {
	lo, hi uint64 // inclusive range of allocatable offsets, lo <= hi
	cursor uint64 // last allocated offset; the next search starts after it
	n      uint64 // number of used offsets
	chunks map[uint64]*chunk
	// last caches the most recently touched chunk (hot path for /24 churn).
	lastIdx uint64
	last    *chunk
}

func newPool(lo, hi uint64) *pool {
	return &pool{lo: lo, hi: hi, cursor: hi, chunks: make(map[uint64]*chunk)}
}

func (p *pool) capacity() uint64 { return p.hi - p.lo + 1 }

func (p *pool) getChunk(idx uint64) *chunk {
	if p.last != nil && p.lastIdx == idx {
		return p.last
	}
	c := p.chunks[idx]
	if c != nil {
		p.last, p.lastIdx = c, idx
	}
	return c
}

// used reports whether off is allocated.
func (p *pool) used(off uint64) bool {
	c := p.getChunk(off >> chunkShift)
	return c != nil && c.words[(off&(chunkSize-1))>>6]&(1<<(off&63)) != 0
}

// nextFree returns the first free offset in [from, to].
func (p *pool) nextFree(from, to uint64) (uint64, bool) {
	for from <= to {
		idx := from >> chunkShift
		c := p.getChunk(idx)
		if c == nil {
			return from, true
		}
		if c.used < chunkSize {
			w := (from & (chunkSize - 1)) >> 6
			word := ^c.words[w] &^ (1<<(from&63) - 1)
			for {
				if word != 0 {
					off := idx<<chunkShift | w<<6 | uint64(bits.TrailingZeros64(word))
					if off > to {
						return 0, false
					}
					return off, true
				}
				w++
				if w == chunkWords {
					break
				}
				word = ^c.words[w]
			}
		}
		next := (idx + 1) << chunkShift
		if next == 0 { // wrapped past the top of the 64-bit offset space
			return 0, false
		}
		from = next
	}
	return 0, false
}

// alloc takes the next free offset after the cursor, wrapping around.
func (p *pool) alloc() (uint64, bool) {
	if p.n >= p.capacity() {
		return 0, false
	}
	start := p.lo
	if p.cursor >= p.lo && p.cursor < p.hi {
		start = p.cursor + 1
	}
	off, ok := p.nextFree(start, p.hi)
	if !ok && start > p.lo {
		off, ok = p.nextFree(p.lo, start-1)
	}
	if !ok {
		return 0, false // unreachable while n < capacity
	}
	p.set(off)
	if old := p.cursor >> chunkShift; old != off>>chunkShift {
		// The cursor leaves its chunk: drop it if it was kept only for the cursor.
		if c := p.chunks[old]; c != nil && c.used == 0 {
			delete(p.chunks, old)
			if p.last == c {
				p.last = nil
			}
		}
	}
	p.cursor = off
	return off, true
}

// claim marks a specific offset used. It returns false if off is outside the
// range or already used. The cursor does not move.
func (p *pool) claim(off uint64) bool {
	if off < p.lo || off > p.hi || p.used(off) {
		return false
	}
	p.set(off)
	return true
}

func (p *pool) set(off uint64) {
	idx := off >> chunkShift
	c := p.getChunk(idx)
	if c == nil {
		c = new(chunk)
		p.chunks[idx] = c
		p.last, p.lastIdx = c, idx
	}
	c.words[(off&(chunkSize-1))>>6] |= 1 << (off & 63)
	c.used++
	p.n++
}

// release frees off; it reports whether off was used.
func (p *pool) release(off uint64) bool {
	idx := off >> chunkShift
	c := p.getChunk(idx)
	if c == nil {
		return false
	}
	w, m := (off&(chunkSize-1))>>6, uint64(1)<<(off&63)
	if c.words[w]&m == 0 {
		return false
	}
	c.words[w] &^= m
	c.used--
	p.n--
	// Drop empty chunks, except the one the cursor is in: that one is about
	// to be used again, and keeping it makes steady churn allocation-free.
	if c.used == 0 && idx != p.cursor>>chunkShift {
		delete(p.chunks, idx)
		if p.last == c {
			p.last = nil
		}
	}
	return true
}

// clone returns a deep copy of p.
func (p *pool) clone() *pool {
	q := &pool{lo: p.lo, hi: p.hi, cursor: p.cursor, n: p.n, chunks: make(map[uint64]*chunk, len(p.chunks))}
	for idx, c := range p.chunks {
		cc := *c
		q.chunks[idx] = &cc
	}
	return q
}

// max returns the highest used offset; ok is false if none is used.
func (p *pool) max() (off uint64, ok bool) {
	for idx, c := range p.chunks {
		if c.used == 0 {
			continue
		}
		for w := chunkWords - 1; w >= 0; w-- {
			if word := c.words[w]; word != 0 {
				o := idx<<chunkShift | uint64(w)<<6 | uint64(63-bits.LeadingZeros64(word))
				if !ok || o > off {
					off, ok = o, true
				}
				break
			}
		}
	}
	return off, ok
}
