package engine

// seqQueue is a worker's waiting queue: a ring over an array whose length
// is zero or a power of two. Submit pushes at the back, admission pops the
// front and a preempted sequence goes back to the front, each without moving
// another entry, and a queue that stays within its array allocates nothing
// (a slice popped from its front would be copied into a new array every
// time its end reached its capacity).
type seqQueue struct {
	buf  []seq
	head int // index in buf of the first entry
	n    int // entries
}

func (q *seqQueue) len() int { return q.n }

// at is the queue's i-th entry, 0 <= i < len(). The pointer is good until
// the next push.
func (q *seqQueue) at(i int) *seq { return &q.buf[(q.head+i)&(len(q.buf)-1)] }

// room makes room for one more entry, doubling the array when full.
func (q *seqQueue) room() {
	if q.n < len(q.buf) {
		return
	}
	buf := make([]seq, max(8, 2*len(q.buf)))
	for i := range q.n {
		buf[i] = *q.at(i)
	}
	q.buf, q.head = buf, 0
}

func (q *seqQueue) pushBack(s seq) {
	q.room()
	q.n++
	*q.at(q.n - 1) = s
}

func (q *seqQueue) pushFront(s seq) {
	q.room()
	q.head = (q.head - 1) & (len(q.buf) - 1)
	q.n++
	q.buf[q.head] = s
}

// popFront removes and returns the first entry; the queue must not be empty.
func (q *seqQueue) popFront() seq {
	s := q.buf[q.head]
	q.head = (q.head + 1) & (len(q.buf) - 1)
	q.n--
	return s
}

// remove takes out the i-th entry, keeping the others in order.
func (q *seqQueue) remove(i int) {
	for ; i < q.n-1; i++ {
		*q.at(i) = *q.at(i + 1)
	}
	q.n--
}
