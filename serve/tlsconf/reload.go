package tlsconf

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultCheckInterval is how often a Reloader looks at its files: a
// rotated certificate is presented within this long, at the cost of two
// stat calls per interval, never per handshake.
const DefaultCheckInterval = 10 * time.Second

// Reloader holds a certificate and its key loaded from two PEM files and
// loads them again when the files change. It is safe for concurrent use.
type Reloader struct {
	certFile, keyFile string
	// CheckInterval is the shortest time between two looks at the files;
	// 0 looks at every handshake (tests).
	CheckInterval time.Duration
	// OnError hears of a changed pair that failed to load (the old pair
	// stays); nil ignores it.
	OnError func(error)
	// now is the clock; tests replace it.
	now func() time.Time

	pair atomic.Pointer[tls.Certificate]

	mu        sync.Mutex // held while checking and loading
	lastCheck time.Time
	stamp     fileStamp
}

// fileStamp is what tells that a file changed.
type fileStamp struct {
	certSize, keySize int64
	certMod, keyMod   time.Time
}

// NewReloader loads the pair at certFile and keyFile.
func NewReloader(certFile, keyFile string) (*Reloader, error) {
	if certFile == "" || keyFile == "" {
		return nil, errors.New("tlsconf: --tls-cert-file and --tls-private-key-file go together; give both")
	}
	r := &Reloader{certFile: certFile, keyFile: keyFile, CheckInterval: DefaultCheckInterval, now: time.Now}
	st, err := r.statFiles()
	if err != nil {
		return nil, err
	}
	if err := r.load(); err != nil {
		return nil, err
	}
	r.stamp, r.lastCheck = st, r.now()
	return r, nil
}

func (r *Reloader) statFiles() (fileStamp, error) {
	c, err := os.Stat(r.certFile)
	if err != nil {
		return fileStamp{}, fmt.Errorf("tlsconf: certificate file: %w", err)
	}
	k, err := os.Stat(r.keyFile)
	if err != nil {
		return fileStamp{}, fmt.Errorf("tlsconf: private key file: %w", err)
	}
	return fileStamp{certSize: c.Size(), keySize: k.Size(), certMod: c.ModTime(), keyMod: k.ModTime()}, nil
}

func (r *Reloader) load() error {
	pair, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return fmt.Errorf("tlsconf: loading %s and %s: %w (want PEM files of a certificate and its private key)", r.certFile, r.keyFile, err)
	}
	r.pair.Store(&pair)
	return nil
}

// refresh loads the pair again if the interval passed and the files changed.
func (r *Reloader) refresh() {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if now.Sub(r.lastCheck) < r.CheckInterval {
		return
	}
	r.lastCheck = now
	st, err := r.statFiles()
	if err != nil {
		r.report(err)
		return
	}
	if st == r.stamp {
		return
	}
	if err := r.load(); err != nil {
		// Half-written files (the key replaced before the certificate):
		// try again at the next check, serving the old pair meanwhile.
		r.report(err)
		return
	}
	r.stamp = st
}

func (r *Reloader) report(err error) {
	if r.OnError != nil {
		r.OnError(err)
	}
}

// Certificate returns the current pair, reloading it first if due.
func (r *Reloader) Certificate() *tls.Certificate {
	r.refresh()
	return r.pair.Load()
}

// GetCertificate is tls.Config.GetCertificate.
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.Certificate(), nil
}

// GetClientCertificate is tls.Config.GetClientCertificate.
func (r *Reloader) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return r.Certificate(), nil
}
