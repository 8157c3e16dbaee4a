package gossip

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/musterhq/muster/shared/config"
)

// KeySize is the size of the gossip encryption key (AES-256).
const KeySize = 32

// ErrBadKey is returned for a key that is not base64 of KeySize bytes.
var ErrBadKey = errors.New("bad gossip key")

// GenerateKey returns a new random key, base64-encoded, as `muster gossip
// keygen` prints it.
func GenerateKey() (string, error) {
	k := make([]byte, KeySize)
	if _, err := rand.Read(k); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(k), nil
}

// ParseKey decodes a base64 key of KeySize bytes (surrounding space is ignored).
func ParseKey(s string) ([]byte, error) {
	k, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("%w: not base64 (make one with muster gossip keygen)", ErrBadKey)
	}
	if len(k) != KeySize {
		return nil, fmt.Errorf("%w: %d bytes, want %d (make one with muster gossip keygen)", ErrBadKey, len(k), KeySize)
	}
	return k, nil
}

// ReadKeyFile reads and decodes a key file. A file its group or others may
// read is refused (config.ErrFileOpen): the key lets anyone into the pool.
func ReadKeyFile(path string) ([]byte, error) {
	if err := config.CheckPrivateFile(path); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	k, err := ParseKey(string(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}
