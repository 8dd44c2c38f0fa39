package gateway

import (
	"errors"
	"math/rand/v2"
	"testing"
)

var testKey = []byte("0123456789abcdef0123456789abcdef")

func newSlots(t *testing.T, workers, perWorker, waiting int) *Slots {
	t.Helper()
	s, err := NewSlots(workers, SlotsConfig{MaxInflightPerWorker: perWorker, MaxWaitingRequests: waiting}, testKey)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func nonce(b byte) [16]byte { return [16]byte{b} }

// acquire and release fail the test on an error the scenario does not expect.
func acquire(t *testing.T, s *Slots, id uint64) {
	t.Helper()
	if _, _, err := s.Acquire(id, -1); err != nil {
		t.Fatal(err)
	}
}

func release(t *testing.T, s *Slots, id uint64, o Outcome) []Grant {
	t.Helper()
	g, err := s.Release(id, o)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestBoundedAdmission(t *testing.T) {
	s := newSlots(t, 2, 2, 2)
	// Four permits (2 workers x 2), then two waiting, then overloaded.
	for id := uint64(1); id <= 4; id++ {
		g, queued, err := s.Acquire(id, -1)
		if err != nil || queued {
			t.Fatalf("submission %d: %+v queued=%v err=%v, want a grant", id, g, queued, err)
		}
	}
	if s.Inflight(0) != 2 || s.Inflight(1) != 2 {
		t.Fatalf("inflight %d/%d, want 2/2: permits spread to the least loaded worker", s.Inflight(0), s.Inflight(1))
	}
	for id := uint64(5); id <= 6; id++ {
		if _, queued, err := s.Acquire(id, -1); err != nil || !queued {
			t.Fatalf("submission %d: queued=%v err=%v, want queued", id, queued, err)
		}
	}
	if _, _, err := s.Acquire(7, -1); !errors.Is(err, ErrOverloaded) {
		t.Fatalf("submission 7: err = %v, want ErrOverloaded", err)
	}
	// A worker never holds more than its slots: a release admits exactly one.
	grants, err := s.Release(1, Completed)
	if err != nil || len(grants) != 1 || grants[0].ID != 5 {
		t.Fatalf("release 1: grants %+v err %v, want submission 5", grants, err)
	}
	if s.Inflight(grants[0].Worker) != 2 {
		t.Errorf("worker %d holds %d, want 2", grants[0].Worker, s.Inflight(grants[0].Worker))
	}
	if _, _, err := s.Acquire(2, -1); err == nil {
		t.Error("a submission was admitted twice")
	}
	if _, err := s.Release(99, Completed); !errors.Is(err, ErrUnknownRequest) {
		t.Errorf("release of an unknown submission: %v", err)
	}
}

func TestOverlappingCancellation(t *testing.T) {
	s := newSlots(t, 1, 1, 10)
	acquire(t, s, 1)                     // holds the only permit
	if _, q, _ := s.Acquire(2, -1); !q { // waits
		t.Fatal("2 not queued")
	}
	if _, q, _ := s.Acquire(3, -1); !q { // waits behind 2
		t.Fatal("3 not queued")
	}
	// 2 gives up while 3 still waits: 3 keeps its place, 2 is gone.
	if g, err := s.Cancel(2); err != nil || len(g) != 0 {
		t.Fatalf("cancel 2: %+v %v", g, err)
	}
	if s.Waiting() != 1 {
		t.Fatalf("waiting = %d, want 1", s.Waiting())
	}
	g := release(t, s, 1, Completed)
	if len(g) != 1 || g[0].ID != 3 {
		t.Fatalf("after release: %+v, want the permit for 3", g)
	}
	if _, err := s.Cancel(2); !errors.Is(err, ErrUnknownRequest) {
		t.Errorf("cancel of a gone submission: %v", err)
	}
}

func TestPermitAssignedToAwakenedWaiter(t *testing.T) {
	s := newSlots(t, 1, 1, 10)
	acquire(t, s, 1)
	acquire(t, s, 2)
	acquire(t, s, 3)
	// 1 ends: its permit goes to 2 ...
	g := release(t, s, 1, Completed)
	if len(g) != 1 || g[0].ID != 2 {
		t.Fatalf("release 1: %+v, want the permit for 2", g)
	}
	// ... which cancels at that moment, before using it: the permit must
	// pass on to 3, not vanish.
	g, err := s.Cancel(2)
	if err != nil || len(g) != 1 || g[0].ID != 3 {
		t.Fatalf("cancel 2 after its grant: %+v %v, want the permit for 3", g, err)
	}
	if s.Inflight(0) != 1 || s.Waiting() != 0 {
		t.Errorf("inflight %d waiting %d, want 1 and 0", s.Inflight(0), s.Waiting())
	}
}

func TestQuarantineOnUncertainCompletion(t *testing.T) {
	s := newSlots(t, 2, 2, 10)
	for id := uint64(1); id <= 4; id++ {
		acquire(t, s, id) // 1,3 on worker 0; 2,4 on worker 1
	}
	// A lost connection on worker 0 quarantines all of its slots.
	if g := release(t, s, 1, Uncertain); len(g) != 0 {
		t.Fatalf("grants %+v into a quarantined worker", g)
	}
	if !s.Quarantined(0) || s.Quarantines() != 1 {
		t.Fatal("worker 0 not quarantined")
	}
	// New work goes to worker 1 only, even when it prefers worker 0.
	release(t, s, 2, Completed)
	g, queued, _ := s.Acquire(5, 0)
	if queued || g.Worker != 1 {
		t.Fatalf("submission 5 got %+v queued=%v, want worker 1", g, queued)
	}
	if _, queued, _ := s.Acquire(6, 0); !queued {
		t.Fatal("submission 6 admitted although only the quarantined worker has room")
	}
	// A fence cannot start while worker 0 still holds a lease.
	if _, err := s.Challenge(0, nonce(1)); !errors.Is(err, ErrLeasesNotDrain) {
		t.Fatalf("challenge with a lease held: %v", err)
	}
	// Draining alone does not restore capacity.
	release(t, s, 3, Completed)
	if !s.Quarantined(0) || s.Waiting() != 1 {
		t.Fatal("a drained worker left quarantine without a fence")
	}
	c, err := s.Challenge(0, nonce(1))
	if err != nil {
		t.Fatal(err)
	}
	g2, err := s.Fence(SignIdle(testKey, c))
	if err != nil || len(g2) != 1 || g2[0].ID != 6 || g2[0].Worker != 0 {
		t.Fatalf("fence: %+v %v, want submission 6 on worker 0", g2, err)
	}
}

func TestAuthenticatedRecovery(t *testing.T) {
	quarantined := func(t *testing.T) *Slots {
		s := newSlots(t, 1, 1, 10)
		acquire(t, s, 1)
		release(t, s, 1, Uncertain)
		acquire(t, s, 2) // waits for the worker
		return s
	}
	t.Run("good fence restores", func(t *testing.T) {
		s := quarantined(t)
		c, _ := s.Challenge(0, nonce(1))
		if !VerifyChallenge(testKey, c) {
			t.Fatal("the worker cannot verify the gateway's challenge")
		}
		g, err := s.Fence(SignIdle(testKey, c))
		if err != nil || s.Quarantined(0) || len(g) != 1 || s.Fences().Recovered != 1 {
			t.Fatalf("fence: %+v %v quarantined=%v", g, err, s.Quarantined(0))
		}
	})
	t.Run("bad signature", func(t *testing.T) {
		s := quarantined(t)
		c, _ := s.Challenge(0, nonce(1))
		st := SignIdle([]byte("another key of sixteen+ bytes"), c)
		if _, err := s.Fence(st); !errors.Is(err, ErrBadSignature) || !s.Quarantined(0) || s.Fences().BadSignature != 1 {
			t.Fatalf("fence with a wrong key: %v", err)
		}
		forged := SignIdle(testKey, c)
		forged.Generation++ // signed for one generation, claims another
		if _, err := s.Fence(forged); !errors.Is(err, ErrBadSignature) {
			t.Fatalf("altered statement: %v", err)
		}
	})
	t.Run("stale generation", func(t *testing.T) {
		s := quarantined(t)
		c1, _ := s.Challenge(0, nonce(1))
		old := SignIdle(testKey, c1)
		if _, err := s.Fence(old); err != nil {
			t.Fatal(err)
		}
		// Quarantined again: the answer from the first quarantine is stale.
		release(t, s, 2, Uncertain)
		if _, err := s.Fence(old); !errors.Is(err, ErrStaleGeneration) || !s.Quarantined(0) {
			t.Fatalf("stale answer: %v", err)
		}
		if s.Fences().StaleGeneration != 1 {
			t.Errorf("counts = %+v", s.Fences())
		}
	})
	t.Run("replayed nonce", func(t *testing.T) {
		s := quarantined(t)
		c1, _ := s.Challenge(0, nonce(1))
		if _, err := s.Challenge(0, nonce(2)); err != nil { // supersedes c1
			t.Fatal(err)
		}
		if _, err := s.Fence(SignIdle(testKey, c1)); !errors.Is(err, ErrReplayedNonce) || !s.Quarantined(0) {
			t.Fatalf("answer to a superseded challenge: %v", err)
		}
		if _, err := s.Challenge(0, nonce(1)); err == nil {
			t.Fatal("a used nonce was accepted for a new challenge")
		}
		// Re-challenging with the outstanding nonce supersedes it too.
		if _, err := s.Challenge(0, nonce(2)); err == nil {
			t.Fatal("the outstanding nonce was accepted again")
		}
		c3, _ := s.Challenge(0, nonce(3))
		if _, err := s.Fence(SignIdle(testKey, c3)); err != nil {
			t.Fatal(err)
		}
		if s.Fences().Replayed != 1 || s.Fences().Recovered != 1 {
			t.Errorf("counts = %+v", s.Fences())
		}
	})
	t.Run("operator release", func(t *testing.T) {
		s := quarantined(t)
		g, err := s.OperatorRelease(0)
		if err != nil || s.Quarantined(0) || len(g) != 1 {
			t.Fatalf("operator release: %+v %v", g, err)
		}
	})
}

// TestSlotsAccountingCloses: under random acquires, releases (some
// uncertain), cancels and fences, no worker exceeds its slots, no quarantined
// worker gets a grant, no submission is granted twice or lost.
func TestSlotsAccountingCloses(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 3))
		s := newSlots(t, 3, 2, 5)
		granted := map[uint64]int{}
		waiting := map[uint64]bool{}
		ended := map[uint64]string{}
		var nextNonce byte
		take := func(gs []Grant) {
			for _, g := range gs {
				if !waiting[g.ID] {
					t.Fatalf("seed %d: grant to %d, which was not waiting", seed, g.ID)
				}
				if s.Quarantined(g.Worker) {
					t.Fatalf("seed %d: grant on quarantined worker %d", seed, g.Worker)
				}
				delete(waiting, g.ID)
				granted[g.ID] = g.Worker
			}
		}
		for id := uint64(1); id <= 400; id++ {
			switch op := rng.IntN(5); {
			case op <= 1:
				g, queued, err := s.Acquire(id, rng.IntN(4)-1)
				switch {
				case err != nil:
					ended[id] = "rejected"
				case queued:
					waiting[id] = true
				default:
					granted[g.ID] = g.Worker
				}
			case op == 2 && len(granted) > 0:
				for hid := range granted {
					o := Completed
					if rng.IntN(8) == 0 {
						o = Uncertain
					}
					gs, err := s.Release(hid, o)
					if err != nil {
						t.Fatal(err)
					}
					delete(granted, hid)
					ended[hid] = "released"
					take(gs)
					break
				}
			case op == 3 && len(waiting) > 0:
				for wid := range waiting {
					if _, err := s.Cancel(wid); err != nil {
						t.Fatal(err)
					}
					delete(waiting, wid)
					ended[wid] = "cancelled"
					break
				}
			default:
				for w := range 3 {
					if s.Quarantined(w) && s.Inflight(w) == 0 {
						nextNonce++
						c, err := s.Challenge(w, nonce(nextNonce))
						if err != nil {
							t.Fatal(err)
						}
						gs, err := s.Fence(SignIdle(testKey, c))
						if err != nil {
							t.Fatal(err)
						}
						take(gs)
					}
				}
			}
			perWorker := [3]int{}
			for _, w := range granted {
				perWorker[w]++
			}
			for w := range 3 {
				if perWorker[w] != s.Inflight(w) || perWorker[w] > 2 {
					t.Fatalf("seed %d: worker %d holds %d permits, slots say %d (limit 2)", seed, w, perWorker[w], s.Inflight(w))
				}
			}
			if len(waiting) != s.Waiting() {
				t.Fatalf("seed %d: %d waiting, slots say %d", seed, len(waiting), s.Waiting())
			}
		}
	}
}

func TestSlotsConfigValidate(t *testing.T) {
	if _, err := NewSlots(1, SlotsConfig{MaxInflightPerWorker: 0}, testKey); err == nil {
		t.Error("zero slots per worker accepted")
	}
	if _, err := NewSlots(1, DefaultSlotsConfig(), []byte("short")); err == nil {
		t.Error("a short key accepted")
	}
	if _, err := NewSlots(0, DefaultSlotsConfig(), testKey); err == nil {
		t.Error("zero workers accepted")
	}
	s := newSlots(t, 1, 1, 1)
	acquire(t, s, 1)
	if _, err := s.Release(1, 0); err == nil {
		t.Error("a release without an outcome was accepted")
	}
}
