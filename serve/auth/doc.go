// Package auth holds the live services' authentication (Stargate).
//
// Messages between services (a gateway's registration, stats and heartbeats
// to a router; operator calls to admin endpoints) are signed with
// HMAC-SHA256. A signed request carries these headers:
//
//	X-Stargate-Key-Id     which shared key signed it
//	X-Stargate-Sender     the sender's name (a gateway id, "operator", ...)
//	X-Stargate-Boot       a random id the sender draws when it starts
//	X-Stargate-Seq        a number that increases with every message of that boot
//	X-Stargate-Timestamp  Unix milliseconds at signing
//	X-Stargate-Signature  hex HMAC-SHA256 over method, path, the five values
//	                      above and the SHA-256 of the body
//
// A Verifier accepts a message only if the key id is known, the signature
// matches, the timestamp is within MaxSkew of its clock and the sequence
// number is higher than the last one it accepted from that sender and boot.
// It keeps those numbers in memory only, so a control-plane message (Verify,
// VerifyService) must also be signed after the verifier started, less
// StartSkew: a message captured before a restart is not taken again after it.
// Everything else is rejected with a reason and counted.
//
// API keys for clients are kept as SHA-256 hashes and compared in constant
// time; the Authorization header is read as "Bearer KEY".
//
// Signer, Verifier and APIKeys are safe for concurrent use.
package auth
