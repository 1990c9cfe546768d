// Package credential owns the files that hold the credentials chime
// generates for the servers it starts for itself (the embedded broker, the
// local ClickHouse): "user:password" on one line, in the state dir, readable
// by its owner only. The password is generated at first start and kept, so
// other processes on the host can be given it, and restarts keep it.
package credential

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Credential is a user and its password.
type Credential struct {
	User, Password string
}

// NewPassword returns 24 random bytes in hex.
func NewPassword() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b) // crypto/rand never returns an error
	return hex.EncodeToString(b)
}

// Load reads the credential kept in path.
func Load(path string) (Credential, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return Credential{}, fmt.Errorf("credential: %w", err)
	}
	user, pass, ok := strings.Cut(strings.TrimSpace(string(raw)), ":")
	if !ok || user == "" || pass == "" {
		return Credential{}, fmt.Errorf("credential %s: want user:password on one line (delete the file to have a new one generated)", path)
	}
	return Credential{User: user, Password: pass}, nil
}

// LoadOrCreate reads the credential kept in path, or creates the file
// (0600) with user and a new random password. Processes starting at once
// on one state dir all end up with the same credential: the file appears
// whole (written aside, then linked into place) or not at all.
func LoadOrCreate(path, user string) (Credential, error) {
	c, err := Load(path)
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		return c, err
	}
	c = Credential{User: user, Password: NewPassword()}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return Credential{}, fmt.Errorf("credential: %w", err)
	}
	defer os.Remove(tmp.Name())
	// CreateTemp makes the file 0600.
	if _, err := fmt.Fprintf(tmp, "%s:%s\n", c.User, c.Password); err != nil {
		tmp.Close()
		return Credential{}, fmt.Errorf("credential: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return Credential{}, fmt.Errorf("credential: %w", err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, os.ErrExist) {
			return Load(path) // another process created it first
		}
		return Credential{}, fmt.Errorf("credential: %w", err)
	}
	return c, nil
}
