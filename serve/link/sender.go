package link

import (
	"context"
	"net"
	"runtime"
	"sync"
)

// maxQueued is how many bytes may wait for the connection before a sender
// waits: the connection's back-pressure.
const maxQueued = 4 << 20

// sender queues frames for one connection and writes every frame queued
// since its last write in one system call.
type sender struct {
	conn net.Conn
	kick chan struct{} // capacity 1: frames are waiting
	// coalesce: before each write, let the goroutines that are ready run
	// first, so that the frames they queue leave in the same write.
	coalesce bool

	mu      sync.Mutex
	room    sync.Cond // the queue drained, or the connection failed
	out     []byte
	writing bool // a write of what was queued is under way
	spare   []byte
	err     error // set once the connection failed or closed
	closed  chan struct{}
}

func newSender(conn net.Conn, coalesce bool) *sender {
	s := &sender{conn: conn, kick: make(chan struct{}, 1), coalesce: coalesce, closed: make(chan struct{})}
	s.room.L = &s.mu
	return s
}

// send queues one frame, waiting while the queue is full; it fails once the
// connection has.
func (s *sender) send(typ byte, id uint32, parts ...[]byte) error {
	return s.sendAfter(0, nil, typ, id, parts...)
}

// sendAfter is send, preceded in the same queue append by a frame of type
// first with payload firstPayload when first is not 0.
func (s *sender) sendAfter(first byte, firstPayload []byte, typ byte, id uint32, parts ...[]byte) error {
	s.mu.Lock()
	for s.err == nil && len(s.out) >= maxQueued {
		s.room.Wait()
	}
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return err
	}
	if first != 0 {
		s.out = appendFrame(s.out, first, id, firstPayload)
	}
	s.out = appendFrame(s.out, typ, id, parts...)
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
	return nil
}

// fail stops the sender with err (the first error wins) and closes the
// connection, which also ends the reader.
func (s *sender) fail(err error) {
	s.mu.Lock()
	first := s.err == nil
	if first {
		s.err = err
		close(s.closed)
	}
	s.room.Broadcast()
	s.mu.Unlock()
	if first {
		_ = s.conn.Close()
	}
}

// closeWhenFlushed closes the connection once what is queued has been
// written, or at once when ctx ends first: a link that shuts down sends the
// last frames of its streams before it closes.
func (s *sender) closeWhenFlushed(ctx context.Context) {
	stop := context.AfterFunc(ctx, func() {
		s.mu.Lock()
		s.room.Broadcast()
		s.mu.Unlock()
	})
	defer stop()
	s.mu.Lock()
	for s.err == nil && (len(s.out) > 0 || s.writing) && ctx.Err() == nil {
		s.room.Wait()
	}
	s.mu.Unlock()
	s.fail(net.ErrClosed)
}

// loop writes queued frames until the connection fails.
func (s *sender) loop() {
	for {
		select {
		case <-s.kick:
		case <-s.closed:
			return
		}
		if s.coalesce {
			// The frames that goroutines ready now queue (the same engine
			// step's events of other streams) leave in this write. It costs
			// each event the time those goroutines run first.
			runtime.Gosched()
		}
		s.mu.Lock()
		buf := s.out
		s.out, s.spare = s.spare[:0], nil
		s.writing = true
		s.mu.Unlock()
		if len(buf) > 0 {
			if _, err := s.conn.Write(buf); err != nil {
				s.fail(err)
				return
			}
		}
		s.mu.Lock()
		s.writing = false
		if cap(buf) <= 2*maxQueued {
			s.spare = buf[:0]
		}
		s.room.Broadcast()
		s.mu.Unlock()
	}
}
