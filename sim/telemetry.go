package sim

import (
	"math/rand/v2"
	"time"

	"github.com/stargate-llm/stargate/client"
	"github.com/stargate-llm/stargate/gateway"
	"github.com/stargate-llm/stargate/router"
	"github.com/stargate-llm/stargate/telemetry"
)

// tokens is the attempt's prompt plus output tokens.
func (a *attempt) tokens() int { return a.sess.prompt.PromptTokens + a.sess.prompt.OutputTokens }

// setupFaults arms the telemetry timers and the faults' events.
func (s *simulation) setupFaults() {
	s.track = s.cfg.Telemetry.Enabled
	s.faultRng = rand.New(rand.NewPCG(subSeed(s.cfg.Seed, streamFaults), 0))
	if s.track {
		for b, bs := range s.backends {
			bs.ttft = telemetry.Window{Span: s.cfg.Telemetry.TTFTWindow, Max: 4096}
			bs.errs = telemetry.ErrorRate{HalfLife: s.cfg.Telemetry.ErrorHalfLife}
			bs.lastBusy = make([]time.Duration, bs.cl.Len())
			s.q.push(telemetryEvent(0, b))
		}
		for r := range s.routers {
			s.q.push(probeEvent(0, r))
		}
	}
	for i, f := range s.cfg.Faults {
		if f.Kind == FaultBurst {
			s.q.push(burstEvent(f.At, i))
			continue
		}
		s.q.push(faultEvent(f.At, i, false))
		if f.Until > 0 {
			s.q.push(faultEvent(f.Until, i, true))
		}
	}
}

// tellRouter lets the attempt's router hear how it ended at its backend.
func (s *simulation) tellRouter(a *attempt, res router.Result) {
	if s.track && a.backend >= 0 {
		s.routers[a.router].r.OnResult(s.now, router.BackendID(a.backend), res)
	}
}

// pathDelay is the extra one-way delay of one message on backend b's path.
func (s *simulation) pathDelay(b int) time.Duration {
	f := &s.backends[b].fault
	if f.pathRTT == 0 && f.pathJitter == 0 {
		return 0
	}
	return f.pathRTT/2 + time.Duration(s.faultRng.ExpFloat64()*float64(f.pathJitter))
}

// applyFault starts or ends fault i and recomputes the state of its backends.
func (s *simulation) applyFault(i int, ending bool) {
	f := &s.cfg.Faults[i]
	if f.Kind == FaultRestart {
		s.restart(i, ending)
		return
	}
	what := "fault:"
	if ending {
		what = "end:"
	}
	for _, b := range f.Backends {
		s.marks = append(s.marks, Mark{At: s.now, Backend: b, What: what + string(f.Kind)})
		bs := s.backends[b]
		was := bs.fault
		st := faultState{dead: was.dead, hung: was.hung} // death is for good
		for k := range s.cfg.Faults {
			g := &s.cfg.Faults[k]
			if !g.active(s.now) || !contains(g.Backends, b) {
				continue
			}
			switch g.Kind {
			case FaultKill:
				st.dead = true
			case FaultHang:
				st.hung = true
			case FaultErrors:
				st.errRate = max(st.errRate, g.Rate)
			case FaultLimit:
				if st.limit == 0 || g.Limit < st.limit {
					st.limit = g.Limit
				}
			case FaultPath:
				st.pathRTT += g.RTT
				st.pathJitter += g.Jitter
			case FaultThermal:
				st.thermal = g
			case FaultPCIe:
				st.pcie = g
			case FaultExporter:
				st.exporterDead = true
			}
		}
		bs.fault = st
		if st.dead && !was.dead {
			s.kill(b)
		}
		if st.hung && !was.hung {
			s.stop(b)
		}
		if !st.exporterDead {
			bs.fellBack = false
		}
		if st.thermal != was.thermal || st.pcie != was.pcie {
			s.throttle(b)
		}
	}
}

func contains(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// stop freezes backend b: no more engine steps or stats.
func (s *simulation) stop(b int) {
	bs := s.backends[b]
	for w := range bs.cl.Len() {
		s.timers.remove(bs.workerTimer + w)
	}
	s.timers.remove(bs.statsTimer)
}

// kill stops backend b and fails at once every attempt it holds.
func (s *simulation) kill(b int) {
	s.stop(b)
	for _, a := range s.attempts.items {
		if a == nil || a.done || a.backend != b || a.place != atGateway {
			continue
		}
		if !a.streaming { // the connection resets before the first byte: the router may retry it
			s.refuse(a, client.Errored, false)
			continue
		}
		a.place = responding
		s.q.push(clientError(s.now+s.back(a, b), a.id, client.Errored))
	}
}

// faulted applies backend faults to an attempt arriving at its gateway; it
// reports whether the attempt was dealt with.
func (s *simulation) faulted(a *attempt) bool {
	b := a.backend
	bs := s.backends[b]
	f := &bs.fault
	fail := func(kind client.Failure) {
		if a.done {
			s.dropAttempt(a.id)
			return
		}
		a.place = responding
		s.q.push(clientError(s.now+s.back(a, b), a.id, kind))
	}
	switch {
	case f.dead:
		if a.done {
			s.dropAttempt(a.id)
		} else {
			s.refuse(a, client.Errored, true)
		}
	case f.hung:
		if a.done {
			s.dropAttempt(a.id)
		} else {
			a.place = lost
		}
	case f.limit > 0 && a.tokens() > f.limit:
		a.limit = f.limit
		if bs.gw.LearnLimit(s.now, gateway.LimitEvidence{Limit: f.limit, Requested: a.tokens()}, a.tokens()) {
			s.markStats(b) // the routers hear of it with the next stats
		}
		if a.done {
			s.dropAttempt(a.id)
		} else {
			s.refuse(a, client.Invalid, false)
		}
	case f.errRate > 0 && s.faultRng.Float64() < f.errRate:
		if s.track {
			bs.errs.Observe(s.now, true)
		}
		// Failed before the gateway counted it: its router must not keep it
		// pending (a live gateway counts it, then reports it done).
		s.routers[a.router].subs[a.pool].Undispatch(router.BackendID(s.local[b]))
		fail(client.Errored)
	default:
		return false
	}
	return true
}

// throttle sets backend b's step cost from its thermal and PCIe faults at now.
func (s *simulation) throttle(b int) {
	bs := s.backends[b]
	if bs.fault.dead || bs.fault.hung {
		return
	}
	_, clock := thermalAt(bs.fault.thermal, s.now)
	_, slow := pcieAt(bs.fault.pcie, s.now)
	for w := range bs.cl.Len() {
		// 1/clock >= 1 and finite: clock is in [MinClock, 1], MinClock > 0;
		// slow is in [1, Slowdown], finite.
		_ = bs.cl.Worker(w).SetSlowdown(s.now, slow/clock)
		s.scheduleWorker(b, w)
	}
}

// telemetryTick builds backend b's report and attaches it to its stats.
func (s *simulation) telemetryTick(b int) {
	s.q.push(telemetryEvent(s.now+s.cfg.Telemetry.Interval, b))
	bs := s.backends[b]
	if bs.fault.dead || bs.fault.hung {
		return
	}
	if bs.fault.thermal != nil || bs.fault.pcie != nil {
		s.throttle(b)
	}
	sig := &telemetry.Signals{At: s.now, State: telemetry.Ready, QueueDepth: bs.gw.Waiting(), MaxModelLen: bs.spec.MaxModelLen}
	if p, ok := bs.ttft.Percentile(s.now, 0.95); ok {
		sig.TTFTP95 = time.Duration(p * float64(time.Second))
	}
	sig.ErrorRate = bs.errs.Rate(s.now)
	heat, clock := thermalAt(bs.fault.thermal, s.now)
	pcie, _ := pcieAt(bs.fault.pcie, s.now)
	var used, total int
	bs.gpus = bs.gpus[:0]
	for w := range bs.cl.Len() {
		wk := bs.cl.Worker(w)
		wk.Sync(s.now)
		sig.Running += wk.Running()
		sig.QueueDepth += wk.Waiting()
		used += wk.KVUsed()
		total += wk.Profile().KVTokens
		busy := wk.Totals().BusyTime
		frac := float64(busy-bs.lastBusy[w]) / float64(s.cfg.Telemetry.Interval)
		bs.lastBusy[w] = busy
		bs.gpus = append(bs.gpus, telemetry.MockDCGM(w, telemetry.GPUState{Busy: frac, Batch: wk.Running(), MaxSeqs: wk.Profile().MaxSeqs,
			KVUsed: wk.KVUsed() + wk.CacheTokens(), KVTokens: wk.Profile().KVTokens, ThermalC: heat, ClockFactor: clock, PCIeStress: pcie}))
	}
	if total > 0 {
		sig.KVFill = float64(used) / float64(total)
	}
	if bs.fault.exporterDead {
		if !bs.fellBack {
			bs.fellBack = true
			s.marks = append(s.marks, Mark{At: s.now, Backend: b, What: "fallback"})
		}
	} else {
		telemetry.Hardware(sig, bs.gpus)
	}
	bs.gw.SetSignals(s.now, sig)
	if s.cfg.RecordSignals {
		s.samples = append(s.samples, SignalSample{Backend: b, Signals: *sig})
	}
	s.markStats(b)
}

// probe measures router r's round trip to every backend that answers.
func (s *simulation) probe(r int) {
	s.q.push(probeEvent(s.now+s.cfg.Telemetry.ProbeInterval, r))
	rs := s.routers[r]
	for b, bs := range s.backends {
		if bs.fault.dead || bs.fault.hung {
			continue
		}
		rtt := s.cfg.Latency[rs.region][bs.spec.Region] + s.cfg.Latency[bs.spec.Region][rs.region] + s.pathDelay(b) + s.pathDelay(b)
		rs.r.OnProbe(s.now, router.BackendID(b), rtt)
	}
}

// burst starts a burst fault's sessions at once.
func (s *simulation) burst(i int) {
	f := &s.cfg.Faults[i]
	s.marks = append(s.marks, Mark{At: s.now, Backend: -1, What: "fault:burst"})
	for range f.Count {
		s.nextTurn(s.newSession(s.faultRng))
	}
	if next := s.now + f.Every; f.Every > 0 && (f.Until == 0 || next < f.Until) {
		s.q.push(burstEvent(next, i))
	}
}
