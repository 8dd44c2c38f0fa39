package telemetry

// Scorer normalises and scores many backends with one set of weights and
// levels, as a router does at every update. Its Normalise and Score give
// bit for bit what the functions Normalise and Score give (the same
// operations in the same order), without copying the weights, levels and
// pressures for every backend: the levels are converted once, the load
// weights' scale is precomputed for every set of available load signals, and
// one pass gives both the score and the health score.
//
// The zero Scorer is not usable; build one with NewScorer. A Scorer is not
// changed by use and may be shared.
type Scorer struct {
	w Weights
	n Norm
	// The levels as float64, and TempMax - TempOK.
	ttftFull, rttFull, jitterFull, tempSpan float64
	// scale[m] is Score's scale of the load weights when the load
	// signals in mask m (see loadMask) are available.
	scale [1 << numLoad]float64
}

// numLoad is the number of load signals.
const numLoad = 7

// loadBit numbers the load signals 0..numLoad-1 in Signal order; other
// signals have -1.
var loadBit = func() (b [NumSignals]int) {
	k := 0
	for s := range NumSignals {
		b[s] = -1
		if loadSignal(s) {
			b[s] = k
			k++
		}
	}
	return b
}()

// NewScorer returns a Scorer for the weights and levels; they should have
// passed their Validate.
func NewScorer(w Weights, n Norm) *Scorer {
	sc := &Scorer{w: w, n: n, ttftFull: float64(n.TTFTFull), rttFull: float64(n.RTTFull),
		jitterFull: float64(n.JitterFull), tempSpan: n.TempMax - n.TempOK}
	for m := range sc.scale {
		// As Score computes it: sums in Signal order.
		var loadAll, loadAvail float64
		for s := range NumSignals {
			if b := loadBit[s]; b >= 0 {
				loadAll += w[s]
				if m&(1<<b) != 0 {
					loadAvail += w[s]
				}
			}
		}
		sc.scale[m] = 1
		if loadAvail > 0 {
			sc.scale[m] = loadAll / loadAvail
		}
	}
	return sc
}

// Normalise is the function Normalise with the Scorer's levels, writing the
// pressures to p and their availability to avail. Every element is written
// once (a pressure that is not available is 0).
func (sc *Scorer) Normalise(p *Pressures, avail *[NumSignals]bool, sig *Signals, load Load, path *Path) {
	switch {
	case load.Capacity > 0:
		p[SigQueue] = queuePressure(load, &sc.n)
		avail[SigQueue] = true
	case sig != nil:
		p[SigQueue] = clamp01(float64(sig.QueueDepth) / float64(max(sig.QueueDepth+sig.Running, 1)))
		avail[SigQueue] = true
	default:
		p[SigQueue], avail[SigQueue] = 0, false
	}
	if path.Known {
		p[SigRTT] = clamp01(float64(path.RTT) / sc.rttFull)
		p[SigJitter] = clamp01(float64(path.Jitter) / sc.jitterFull)
	} else {
		p[SigRTT], p[SigJitter] = 0, 0
	}
	avail[SigRTT], avail[SigJitter] = path.Known, path.Known
	if sig == nil {
		p[SigTTFT], p[SigErrors], p[SigKV] = 0, 0, 0
		avail[SigTTFT], avail[SigErrors], avail[SigKV] = false, false, false
		sc.noHardware(p, avail)
		return
	}
	p[SigTTFT] = clamp01(float64(sig.TTFTP95) / sc.ttftFull)
	p[SigErrors] = clamp01(sig.ErrorRate / sc.n.ErrorFull)
	p[SigKV] = clamp01(sig.KVFill)
	avail[SigTTFT], avail[SigErrors], avail[SigKV] = true, true, true
	if !sig.Hardware {
		sc.noHardware(p, avail)
		return
	}
	p[SigGPU] = clamp01(sig.GPUUtil)
	p[SigMem] = clamp01(sig.MemUtil)
	p[SigSM] = clamp01(sig.SMOccupancy)
	p[SigDRAM] = clamp01(sig.DRAMActive)
	temp := clamp01((sig.TempC - sc.n.TempOK) / sc.tempSpan)
	clock := 0.0
	if sig.MaxSMClockMHz > 0 && sig.SMClockMHz > 0 {
		clock = clamp01((1 - sig.SMClockMHz/sig.MaxSMClockMHz) / sc.n.ClockDropFull)
	}
	p[SigThermal] = max(temp, clock)
	avail[SigGPU], avail[SigMem], avail[SigSM], avail[SigDRAM], avail[SigThermal] = true, true, true, true, true
}

// noHardware marks the hardware pressures unavailable.
func (*Scorer) noHardware(p *Pressures, avail *[NumSignals]bool) {
	p[SigGPU], p[SigMem], p[SigSM], p[SigDRAM], p[SigThermal] = 0, 0, 0, 0, 0
	avail[SigGPU], avail[SigMem], avail[SigSM], avail[SigDRAM], avail[SigThermal] = false, false, false, false, false
}

// Score returns the function Score's score and fallback with the Scorer's
// weights, and the health score: Score over the available pressures that
// are not load.
func (sc *Scorer) Score(p *Pressures, avail *[NumSignals]bool) (score, health float64, fallback bool) {
	// Written out signal by signal in Signal order; an unavailable signal
	// adds +0, which leaves the sum's bits as they are (it starts at +0 and
	// never goes negative).
	scale := sc.scale[b2i(avail[SigQueue])|b2i(avail[SigTTFT])<<1|b2i(avail[SigKV])<<2|b2i(avail[SigGPU])<<3|
		b2i(avail[SigMem])<<4|b2i(avail[SigSM])<<5|b2i(avail[SigDRAM])<<6]
	w := &sc.w
	score += loadTerm(w[SigQueue], p[SigQueue], scale, avail[SigQueue])
	score += loadTerm(w[SigTTFT], p[SigTTFT], scale, avail[SigTTFT])
	v := term(w[SigErrors], p[SigErrors], avail[SigErrors])
	score, health = score+v, health+v
	score += loadTerm(w[SigKV], p[SigKV], scale, avail[SigKV])
	score += loadTerm(w[SigGPU], p[SigGPU], scale, avail[SigGPU])
	score += loadTerm(w[SigMem], p[SigMem], scale, avail[SigMem])
	score += loadTerm(w[SigSM], p[SigSM], scale, avail[SigSM])
	score += loadTerm(w[SigDRAM], p[SigDRAM], scale, avail[SigDRAM])
	v = term(w[SigRTT], p[SigRTT], avail[SigRTT])
	score, health = score+v, health+v
	v = term(w[SigJitter], p[SigJitter], avail[SigJitter])
	score, health = score+v, health+v
	v = term(w[SigThermal], p[SigThermal], avail[SigThermal])
	score, health = score+v, health+v
	return min(score, 1), min(health, 1), !avail[SigGPU]
}

// term is Score's term of a signal that is not load, 0 if unavailable. The
// explicit conversions round every product, as in Score, so no architecture
// fuses a multiply and an add into another result.
func term(w, p float64, ok bool) float64 {
	if !ok {
		return 0
	}
	return float64(w * clamp01(p))
}

// loadTerm is Score's term of a load signal, 0 if unavailable.
func loadTerm(w, p, scale float64, ok bool) float64 {
	if !ok {
		return 0
	}
	return float64(float64(w*clamp01(p)) * scale)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
