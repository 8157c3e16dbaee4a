// Package idp is a small OpenID provider for the end-to-end tests, built on
// zitadel/oidc's op package: the authorization code flow with PKCE, refresh
// tokens and the device authorization grant, with a plain login form. Its
// people (names, passwords, e-mail addresses, groups) are read from a JSON
// file at every sign-in and refresh, so a test changes them by rewriting
// the file.
package idp

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
)

// User is one person of the users file.
type User struct {
	Username string   `json:"username"`
	Password string   `json:"password"`
	Email    string   `json:"email"`
	Groups   []string `json:"groups"`
}

// Users is the users file: {"users": [...]}.
type Users struct {
	Users []User `json:"users"`
}

// WriteUsers writes the users file (mode 0600), replacing it at once.
func WriteUsers(path string, u Users) error {
	b, err := json.Marshal(u)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// userFile reads the users as the file says now.
type userFile struct {
	path string
	mu   sync.Mutex
}

func (f *userFile) byName(name string) (User, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, err := os.ReadFile(f.path)
	if err != nil {
		return User{}, false, err
	}
	var u Users
	if err := json.Unmarshal(b, &u); err != nil {
		return User{}, false, fmt.Errorf("%s: %w", f.path, err)
	}
	for _, x := range u.Users {
		if x.Username == name {
			return x, true, nil
		}
	}
	return User{}, false, nil
}
