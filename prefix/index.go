package prefix

import (
	"fmt"
	"time"
	"unsafe"
)

// ID names a backend in an Index for as long as it is in it. Removed IDs
// are given again to later backends, so IDs stay dense.
type ID int32

// nilNode marks the end of a list of nodes.
const nilNode int32 = -1

// node is one block held by one backend.
type node struct {
	hash uint64
	used time.Duration // when the block was last sent to the backend
	// prev and next link the backend's blocks, most recent first; on the
	// free list next links free nodes.
	prev, next int32
	// samePrev and sameNext link the nodes of the same hash (other backends).
	samePrev, sameNext int32
	backend            ID
}

// NodeBytes is the size of one held (block, backend) pair's node.
const NodeBytes = int(unsafe.Sizeof(node{}))

// BytesPerBlock estimates the memory one held (block, backend) pair costs:
// its node plus a hash map entry (key, value and the map's overhead) when no
// other backend holds the same block, and the node slab's growth slack.
// BenchmarkIndexMemory measures it (about 84 bytes).
const BytesPerBlock = NodeBytes + 44

type backend struct {
	live       bool
	capacity   int
	size       int
	head, tail int32 // most and least recently used
}

// Index is the per-backend index of cached prompt blocks.
type Index struct {
	maxAge   time.Duration
	budget   int              // blocks held over every backend at most (0: no bound)
	held     int              // blocks held over every backend
	byHash   map[uint64]int32 // first node holding the hash
	nodes    []node
	free     int32 // free list of nodes
	backends []backend
	freeIDs  []ID
}

// New returns an empty index. A maxAge above zero drops blocks not sent to
// their backend for that long; zero keeps them until evicted by capacity.
func New(maxAge time.Duration) *Index {
	return &Index{maxAge: max(maxAge, 0), byHash: make(map[uint64]int32), free: nilNode}
}

// SetBudget bounds the blocks held over every backend together (0: no
// bound), whatever each backend's capacity: once the index holds budget
// blocks, a backend takes a new block only in place of its own least
// recently used one, and one holding none takes none. Memory then stays
// under about budget x BytesPerBlock however large the capacities claimed.
// A budget below what is held applies from the next insert.
func (x *Index) SetBudget(blocks int) { x.budget = max(blocks, 0) }

// Add adds a backend that holds at most capacity blocks and returns its ID.
func (x *Index) Add(capacity int) (ID, error) {
	if capacity < 1 {
		return -1, fmt.Errorf("prefix: backend capacity %d blocks, want >= 1", capacity)
	}
	b := backend{live: true, capacity: capacity, head: nilNode, tail: nilNode}
	if n := len(x.freeIDs); n > 0 {
		id := x.freeIDs[n-1]
		x.freeIDs = x.freeIDs[:n-1]
		x.backends[id] = b
		return id, nil
	}
	x.backends = append(x.backends, b)
	return ID(len(x.backends) - 1), nil
}

// Remove drops a backend and every block it holds; its ID may be given to a
// later backend. Unknown IDs are ignored.
func (x *Index) Remove(id ID) {
	b := x.backend(id)
	if b == nil {
		return
	}
	for b.tail != nilNode {
		x.evictTail(b)
	}
	*b = backend{}
	x.freeIDs = append(x.freeIDs, id)
}

// SetCapacity changes a backend's capacity in blocks (at least 1), evicting
// its least recently used blocks beyond it.
func (x *Index) SetCapacity(id ID, capacity int) error {
	b := x.backend(id)
	if b == nil {
		return fmt.Errorf("prefix: no backend %d", id)
	}
	if capacity < 1 {
		return fmt.Errorf("prefix: backend %d capacity %d blocks, want >= 1", id, capacity)
	}
	b.capacity = capacity
	for b.size > b.capacity {
		x.evictTail(b)
	}
	return nil
}

// Capacity is a backend's capacity in blocks (0 for an unknown ID).
func (x *Index) Capacity(id ID) int {
	if b := x.backend(id); b != nil {
		return b.capacity
	}
	return 0
}

// Len is the number of blocks a backend holds (0 for an unknown ID).
func (x *Index) Len(id ID) int {
	if b := x.backend(id); b != nil {
		return b.size
	}
	return 0
}

// Blocks is the number of distinct blocks held by any backend.
func (x *Index) Blocks() int { return len(x.byHash) }

// IDs is one more than the highest ID given so far: the length Match's
// result has.
func (x *Index) IDs() int { return len(x.backends) }

func (x *Index) backend(id ID) *backend {
	if id < 0 || int(id) >= len(x.backends) || !x.backends[id].live {
		return nil
	}
	return &x.backends[id]
}

// Insert records that the prompt of blocks was sent to backend id at now:
// its blocks become the backend's most recent, the first block most recent
// of all, and the backend's least recently used blocks beyond its capacity
// are evicted. A prompt longer than the capacity keeps its first blocks.
// Unknown IDs are ignored.
func (x *Index) Insert(id ID, blocks []uint64, now time.Duration) {
	b := x.backend(id)
	if b == nil {
		return
	}
	x.expire(b, now)
	n := min(len(blocks), b.capacity)
	for i := n - 1; i >= 0; i-- {
		h := blocks[i]
		if k := x.find(id, h); k != nilNode {
			x.unlinkLRU(b, k)
			x.nodes[k].used = now
			x.pushFront(b, k)
			continue
		}
		if b.size >= b.capacity || (x.budget > 0 && x.held >= x.budget) {
			if b.size == 0 {
				return // the budget is spent and this backend holds nothing to give up
			}
			x.evictTail(b)
		}
		k := x.alloc()
		x.nodes[k] = node{hash: h, used: now, backend: id, samePrev: nilNode, sameNext: nilNode}
		if first, ok := x.byHash[h]; ok {
			x.nodes[k].sameNext = first
			x.nodes[first].samePrev = k
		}
		x.byHash[h] = k
		x.pushFront(b, k)
		b.size++
		x.held++
	}
}

// Match writes into out, for every ID, how many leading blocks of blocks
// that backend holds at now, and returns out (resized to IDs(), reusing its
// array) with the longest match. A removed backend's entry is 0.
func (x *Index) Match(blocks []uint64, now time.Duration, out []int32) ([]int32, int) {
	if cap(out) < len(x.backends) {
		out = make([]int32, len(x.backends))
	}
	out = out[:len(x.backends)]
	clear(out)
	best := 0
	for i, h := range blocks {
		k, ok := x.byHash[h]
		if !ok {
			break
		}
		advanced := false
		for ; k != nilNode; k = x.nodes[k].sameNext {
			nd := &x.nodes[k]
			if out[nd.backend] == int32(i) && !x.stale(nd, now) {
				out[nd.backend] = int32(i + 1)
				advanced = true
			}
		}
		if !advanced {
			break
		}
		best = i + 1
	}
	return out, best
}

// MatchAtLeast is Match for the matches of at least minLen blocks (shorter
// ones read 0), at a cost that does not depend on how many backends hold
// the prompt's first minLen-1 blocks (a shared system prompt every backend
// holds): it walks the prompt from its last block back to block minLen-1
// and credits each backend with the deepest block it holds. That is
// Match's answer when blocks are chained (each hash names its whole
// prefix, as the chunker's and the Mooncake traces' do), because a
// backend's blocks are then prefix-closed: a prompt's earlier blocks are
// always touched after its later ones, so they are evicted and aged later.
// For lists that are not chained it may overstate a match.
func (x *Index) MatchAtLeast(blocks []uint64, minLen int, now time.Duration, out []int32) ([]int32, int) {
	if cap(out) < len(x.backends) {
		out = make([]int32, len(x.backends))
	}
	out = out[:len(x.backends)]
	clear(out)
	best := 0
	for i := len(blocks) - 1; i >= max(minLen, 1)-1; i-- {
		k, ok := x.byHash[blocks[i]]
		if !ok {
			continue
		}
		for ; k != nilNode; k = x.nodes[k].sameNext {
			nd := &x.nodes[k]
			if out[nd.backend] == 0 && !x.stale(nd, now) {
				out[nd.backend] = int32(i + 1)
				best = max(best, i+1)
			}
		}
	}
	return out, best
}

func (x *Index) stale(nd *node, now time.Duration) bool {
	return x.maxAge > 0 && now-nd.used > x.maxAge
}

// expire evicts backend b's blocks older than the maximum age.
func (x *Index) expire(b *backend, now time.Duration) {
	for b.tail != nilNode && x.stale(&x.nodes[b.tail], now) {
		x.evictTail(b)
	}
}

// find returns backend id's node for hash h, or nilNode.
func (x *Index) find(id ID, h uint64) int32 {
	k, ok := x.byHash[h]
	if !ok {
		return nilNode
	}
	for ; k != nilNode; k = x.nodes[k].sameNext {
		if x.nodes[k].backend == id {
			return k
		}
	}
	return nilNode
}

func (x *Index) alloc() int32 {
	if x.free != nilNode {
		k := x.free
		x.free = x.nodes[k].next
		return k
	}
	x.nodes = append(x.nodes, node{})
	return int32(len(x.nodes) - 1)
}

func (x *Index) pushFront(b *backend, k int32) {
	nd := &x.nodes[k]
	nd.prev, nd.next = nilNode, b.head
	if b.head != nilNode {
		x.nodes[b.head].prev = k
	}
	b.head = k
	if b.tail == nilNode {
		b.tail = k
	}
}

func (x *Index) unlinkLRU(b *backend, k int32) {
	nd := &x.nodes[k]
	if nd.prev != nilNode {
		x.nodes[nd.prev].next = nd.next
	} else {
		b.head = nd.next
	}
	if nd.next != nilNode {
		x.nodes[nd.next].prev = nd.prev
	} else {
		b.tail = nd.prev
	}
	nd.prev, nd.next = nilNode, nilNode
}

// evictTail drops backend b's least recently used block.
func (x *Index) evictTail(b *backend) {
	k := b.tail
	x.unlinkLRU(b, k)
	nd := &x.nodes[k]
	if nd.samePrev != nilNode {
		x.nodes[nd.samePrev].sameNext = nd.sameNext
	} else if nd.sameNext != nilNode {
		x.byHash[nd.hash] = nd.sameNext
	} else {
		delete(x.byHash, nd.hash)
	}
	if nd.sameNext != nilNode {
		x.nodes[nd.sameNext].samePrev = nd.samePrev
	}
	*nd = node{next: x.free}
	x.free = k
	b.size--
	x.held--
}
