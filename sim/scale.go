package sim

import "time"

// noMessage is a region's due time (see simulation.due) with no stats
// message on its way there.
const noMessage = time.Duration(1<<63 - 1)
