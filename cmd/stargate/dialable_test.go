package main

import (
	"net"
	"testing"
)

// TestDialable: a router's in-process gateway reaches the router's own
// listener at loopback when the router listens on every address, and at
// the listener's address otherwise.
func TestDialable(t *testing.T) {
	for _, tc := range []struct {
		addr *net.TCPAddr
		want string
	}{
		{&net.TCPAddr{IP: net.IPv4zero, Port: 8080}, "127.0.0.1:8080"},
		{&net.TCPAddr{IP: net.IPv6unspecified, Port: 8080}, "[::1]:8080"},
		{&net.TCPAddr{IP: net.IPv4(10, 0, 0, 2), Port: 8080}, "10.0.0.2:8080"},
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9}, "127.0.0.1:9"},
	} {
		if got := dialable(tc.addr); got != tc.want {
			t.Errorf("dialable(%v) = %q, want %q", tc.addr, got, tc.want)
		}
	}
}
