// Package wire holds the messages the live services exchange (Stargate): a
// gateway's stats and heartbeats to routers, and the internal headers. Every
// message is JSON and travels HMAC-signed (package auth).
package wire
