package enroll

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/musterhq/muster/shared/tlsutil"
)

// A renewed key and certificate replace the pair in use in three steps, so
// that a crash at any point leaves a pair the agent can start with once
// Recover ran: both are written beside the pair ("<file>.next"), then the
// key is moved in, then the certificate. The staged certificate is the
// journal: while it exists, the move is not finished.

// nextSuffix names a staged file.
const nextSuffix = ".next"

// stagePair writes the new key, then the new certificate, beside the pair
// in use.
func stagePair(p Paths, keyPEM, certPEM []byte) error {
	if err := tlsutil.WriteFileAtomic(p.Key+nextSuffix, keyPEM, 0o600); err != nil {
		return err
	}
	return tlsutil.WriteFileAtomic(p.Cert+nextSuffix, certPEM, 0o600)
}

// commitPair moves the staged key, then the staged certificate, in place.
func commitPair(p Paths) error {
	if err := os.Rename(p.Key+nextSuffix, p.Key); err != nil {
		return err
	}
	if err := syncDir(p.Dir); err != nil {
		return err
	}
	if err := os.Rename(p.Cert+nextSuffix, p.Cert); err != nil {
		return err
	}
	return syncDir(p.Dir)
}

// Recover finishes or undoes a replacement a crash interrupted: with a
// staged certificate, the move is finished when the staged files (or the
// staged certificate and the key in place) match; any other staged file is
// removed, leaving the pair in use. Nothing staged: nothing to do.
func Recover(p Paths) error {
	certNext, keyNext := p.Cert+nextSuffix, p.Key+nextSuffix
	cert, err := os.ReadFile(certNext)
	if errors.Is(err, fs.ErrNotExist) {
		// At most the key was staged: the pair in use is whole.
		if err := os.Remove(keyNext); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	} else if err != nil {
		return err
	}
	keyFile := keyNext
	if _, err := os.Stat(keyNext); errors.Is(err, fs.ErrNotExist) {
		keyFile = p.Key // the key was moved in already
	}
	key, err := os.ReadFile(keyFile)
	if err != nil {
		return err
	}
	if _, err := tls.X509KeyPair(cert, key); err != nil {
		// Not a pair: drop what was staged.
		os.Remove(keyNext)
		if err := os.Remove(certNext); err != nil {
			return fmt.Errorf("remove %s: %w", certNext, err)
		}
		return nil
	}
	if keyFile == keyNext {
		if err := os.Rename(keyNext, p.Key); err != nil {
			return err
		}
	}
	if err := os.Rename(certNext, p.Cert); err != nil {
		return err
	}
	return syncDir(p.Dir)
}

// syncDir makes the renames in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
