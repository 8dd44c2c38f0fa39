package memnet

import (
	"context"
	"fmt"
	"net"
	"sync"
	"syscall"
)

// Network holds the in-process listeners by address. The zero value is not
// usable; call New.
type Network struct {
	mu        sync.Mutex
	listeners map[string]*Listener
}

// New returns an empty network.
func New() *Network {
	return &Network{listeners: make(map[string]*Listener)}
}

// Listen registers a listener at addr ("host:port"). One listener holds an
// address at a time; once it is closed another may take the address.
func (n *Network) Listen(addr string) (*Listener, error) {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, fmt.Errorf("memnet: listen %q: want host:port: %w", addr, err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if old, taken := n.listeners[addr]; taken && !old.closed() {
		return nil, fmt.Errorf("memnet: listen %q: address already in use", addr)
	}
	l := &Listener{addr: Addr(addr), conns: make(chan net.Conn), done: make(chan struct{})}
	n.listeners[addr] = l
	return l, nil
}

// Dial returns a dial function with net.Dialer.DialContext's signature: an
// address with a listener here gets one end of a pipe whose other end that
// listener accepts; any other address goes to next (nil: a plain
// net.Dialer).
func (n *Network) Dial(next func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if next == nil {
		var d net.Dialer
		next = d.DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		n.mu.Lock()
		l := n.listeners[addr]
		n.mu.Unlock()
		if l == nil {
			return next(ctx, network, addr)
		}
		return l.connect(ctx, network)
	}
}

// Listener is an in-process net.Listener.
type Listener struct {
	addr  Addr
	conns chan net.Conn
	once  sync.Once
	done  chan struct{}
}

// connect hands the listener one end of a new pipe and returns the other,
// once the listener has accepted it.
func (l *Listener) connect(ctx context.Context, network string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
	case <-ctx.Done():
		_, _ = client.Close(), server.Close()
		return nil, &net.OpError{Op: "dial", Net: network, Addr: l.addr, Err: ctx.Err()}
	}
	_, _ = client.Close(), server.Close()
	return nil, &net.OpError{Op: "dial", Net: network, Addr: l.addr, Err: syscall.ECONNREFUSED}
}

// Accept waits for the next connection.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, &net.OpError{Op: "accept", Net: l.addr.Network(), Addr: l.addr, Err: net.ErrClosed}
	}
}

// Close stops accepting. Dials to the address are refused, as by a port
// nobody listens on, until another listener takes it; connections already
// accepted stay open.
func (l *Listener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *Listener) closed() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// Addr is the address the listener was registered at.
func (l *Listener) Addr() net.Addr { return l.addr }

// Addr is a memnet address.
type Addr string

// Network names the network.
func (Addr) Network() string { return "memnet" }

func (a Addr) String() string { return string(a) }
