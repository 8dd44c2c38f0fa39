package router

import "github.com/cespare/xxhash/v2"

// SessionIDKey is the session key of a request whose client names its
// session id (the X-Session-ID header of the live API): a hash, so that
// any string works as an id. The simulator keys its sessions the same way
// when a run is matched with a live one (sim.Config.LiveSessionKeys).
func SessionIDKey(id string) uint64 { return xxhash.Sum64String("h:" + id) }
