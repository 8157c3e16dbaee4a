package auth

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/musterhq/muster/core/store"
)

// AdminTokenFile is the name, inside the data directory, of the file that
// receives the first admin token.
const AdminTokenFile = "admin.token"

// BootstrapName is the name of the first admin token.
const BootstrapName = "admin"

// Bootstrap gives an empty store its first identity: when the store holds no
// token at all, it creates an admin token named "admin", writes its secret to
// <dataDir>/admin.token (mode 0600) and logs the path of that file, never the
// secret. On a store that has tokens it does nothing. The check and the insert
// run in one transaction, so replicas starting together on one database make
// one token, and only the replica whose transaction made it keeps the file.
func Bootstrap(ctx context.Context, st store.Store, dataDir string, log *slog.Logger) error {
	secret, err := NewSecret()
	if err != nil {
		return err
	}
	path := filepath.Join(dataDir, AdminTokenFile)
	created, wrote := false, false
	err = st.Update(ctx, func(tx store.Tx) error {
		created = false
		toks, err := tx.Tokens(ctx)
		if err != nil {
			return fmt.Errorf("list tokens: %w", err)
		}
		if len(toks) > 0 {
			return nil
		}
		// The file is written before the token is stored: should the commit
		// fail, the file is removed again and the next start writes a new
		// one; the other order could store a token nobody has.
		if err := writeSecretFile(path, secret); err != nil {
			return err
		}
		created, wrote = true, true
		_, ierr := insertToken(ctx, tx, BootstrapName, []string{store.RoleAdmin}, Options{}, secret, store.ActorCore, "")
		return ierr
	})
	if wrote && (err != nil || !created) {
		// Another replica made the token first (this Update ran again and
		// found it), or the commit failed: the file would open nothing.
		removeSecretFile(path, secret)
	}
	if err != nil {
		return fmt.Errorf("bootstrap admin token: %w", err)
	}
	if created {
		log.Info("created the first admin token; its secret is in this file (mode 0600)", "path", path, "name", BootstrapName)
	}
	return nil
}

// removeSecretFile removes the file at path if it still holds secret.
func removeSecretFile(path, secret string) {
	if b, err := os.ReadFile(path); err == nil && string(b) == secret+"\n" {
		_ = os.Remove(path)
	}
}

// writeSecretFile writes secret to path with mode 0600, atomically: a reader
// never sees a half-written file, and a file that existed with a wider mode is
// replaced rather than reused.
func writeSecretFile(path, secret string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	f, err := os.CreateTemp(dir, ".admin.token-*")
	if err != nil {
		return fmt.Errorf("write admin token: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after the rename
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("write admin token: %w", err)
	}
	if _, err := f.WriteString(secret + "\n"); err != nil {
		f.Close()
		return fmt.Errorf("write admin token: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("write admin token: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write admin token: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write admin token: %w", err)
	}
	return nil
}
