package serve

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"

	"golang.org/x/crypto/bcrypt"
)

// Auth checks HTTP Basic credentials: one user and password given on the
// command line, or the bcrypt entries of an htpasswd file. It is safe for
// concurrent use.
type Auth struct {
	user, pass [32]byte          // one user: SHA-256 of each, compared in constant time
	hashes     map[string][]byte // user -> bcrypt hash, from a file
	// dummy is a bcrypt hash of a random password at the file's highest
	// cost, compared against for an unknown user, so that refusing one
	// takes as long as refusing a known user's wrong password: the time
	// of a refusal does not tell which users exist.
	dummy []byte

	mu sync.Mutex
	// good holds the SHA-256 of credentials that passed bcrypt, so that a
	// client's hundreds of range requests cost one bcrypt (tens of
	// milliseconds of CPU), not one each. Bounded: a client cannot grow it
	// with wrong passwords, which are never kept.
	good map[[32]byte]bool // GUARDED_BY(mu)
}

// maxGoodCredentials bounds Auth.good.
const maxGoodCredentials = 256

// ParseAuth returns the Auth of "user:password" (--auth).
func ParseAuth(s string) (*Auth, error) {
	user, pass, ok := strings.Cut(s, ":")
	if !ok || user == "" || pass == "" {
		return nil, fmt.Errorf("serve: --auth: want user:password, with neither empty")
	}
	return &Auth{user: sha256.Sum256([]byte(user)), pass: sha256.Sum256([]byte(pass))}, nil
}

// LoadHtpasswd returns the Auth of an htpasswd file (--auth-file) whose
// entries are "user:bcrypt-hash" ("htpasswd -B"). Any other hash (MD5,
// SHA-1, crypt) is refused with its line number: those are too cheap to
// guess to be served beyond loopback.
func LoadHtpasswd(file string) (*Auth, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("serve: --auth-file: %w", err)
	}
	defer f.Close()
	a := &Auth{hashes: make(map[string][]byte)}
	cost := bcrypt.MinCost
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		user, hash, ok := strings.Cut(l, ":")
		if !ok || user == "" {
			return nil, fmt.Errorf("serve: --auth-file %s:%d: want user:hash", file, line)
		}
		c, err := bcrypt.Cost([]byte(hash))
		if err != nil {
			return nil, fmt.Errorf("serve: --auth-file %s:%d: user %q: not a bcrypt hash (make one with htpasswd -B): %w", file, line, user, err)
		}
		cost = max(cost, c)
		a.hashes[user] = []byte(hash)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("serve: --auth-file %s: %w", file, err)
	}
	if len(a.hashes) == 0 {
		return nil, fmt.Errorf("serve: --auth-file %s: no user in it", file)
	}
	random := make([]byte, 32)
	rand.Read(random)
	if a.dummy, err = bcrypt.GenerateFromPassword([]byte(hex.EncodeToString(random)), cost); err != nil {
		return nil, fmt.Errorf("serve: --auth-file %s: %w", file, err)
	}
	return a, nil
}

// Check reports whether r carries credentials that a accepts.
func (a *Auth) Check(r *http.Request) bool {
	user, pass, ok := r.BasicAuth()
	if !ok {
		return false
	}
	if a.hashes == nil {
		u, p := sha256.Sum256([]byte(user)), sha256.Sum256([]byte(pass))
		return subtle.ConstantTimeCompare(u[:], a.user[:])&subtle.ConstantTimeCompare(p[:], a.pass[:]) == 1
	}
	key := sha256.Sum256([]byte(user + "\x00" + pass))
	a.mu.Lock()
	known := a.good[key]
	a.mu.Unlock()
	if known {
		return true
	}
	hash, found := a.hashes[user]
	if !found {
		hash = a.dummy
	}
	if bcrypt.CompareHashAndPassword(hash, []byte(pass)) != nil || !found {
		return false
	}
	a.mu.Lock()
	if a.good == nil || len(a.good) >= maxGoodCredentials {
		a.good = make(map[[32]byte]bool)
	}
	a.good[key] = true
	a.mu.Unlock()
	return true
}
