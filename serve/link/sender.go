package link

import (
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

	mu     sync.Mutex
	room   sync.Cond // the queue drained, or the connection failed
	out    []byte
	spare  []byte
	err    error // set once the connection failed or closed
	closed chan struct{}
}

func newSender(conn net.Conn) *sender {
	s := &sender{conn: conn, kick: make(chan struct{}, 1), closed: make(chan struct{})}
	s.room.L = &s.mu
	return s
}

// send queues one frame, waiting while the queue is full; it fails once the
// connection has.
func (s *sender) send(typ byte, id uint32, parts ...[]byte) error {
	s.mu.Lock()
	for s.err == nil && len(s.out) >= maxQueued {
		s.room.Wait()
	}
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return err
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

// loop writes queued frames until the connection fails.
func (s *sender) loop() {
	for {
		select {
		case <-s.kick:
		case <-s.closed:
			return
		}
		// Let the goroutines that are ready run first: the frames they queue
		// (the same engine step's events of other streams) leave in this write.
		runtime.Gosched()
		s.mu.Lock()
		buf := s.out
		s.out, s.spare = s.spare[:0], nil
		s.mu.Unlock()
		if len(buf) > 0 {
			if _, err := s.conn.Write(buf); err != nil {
				s.fail(err)
				return
			}
		}
		s.mu.Lock()
		if cap(buf) <= 2*maxQueued {
			s.spare = buf[:0]
		}
		s.room.Broadcast()
		s.mu.Unlock()
	}
}
