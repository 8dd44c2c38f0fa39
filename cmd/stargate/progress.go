package main

import (
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// lazyProgress shows a progress bar on a terminal once a job has run for a
// few seconds, so short jobs stay quiet.
type lazyProgress struct {
	mu    sync.Mutex
	w     io.Writer
	tty   bool
	start time.Time
	bar   *progressbar.ProgressBar
	desc  string
}

func newProgress(w io.Writer, desc string) *lazyProgress {
	f, ok := w.(*os.File)
	return &lazyProgress{w: w, tty: ok && term.IsTerminal(int(f.Fd())), start: time.Now(), desc: desc}
}

// Done implements study.Progress.
func (p *lazyProgress) Done(finished, total int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.tty {
		return
	}
	if p.bar == nil {
		if time.Since(p.start) < 2*time.Second || finished == total {
			return
		}
		p.bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(p.w), progressbar.OptionSetDescription(p.desc),
			progressbar.OptionShowCount(), progressbar.OptionClearOnFinish(), progressbar.OptionSetElapsedTime(true))
	}
	_ = p.bar.Set(finished)
	if finished == total {
		_ = p.bar.Finish()
	}
}
