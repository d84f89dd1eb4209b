package proxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
)

// refreshStore keeps the refresh tokens an authorization server rotated
// (it answered a refresh with a new one, and may have revoked the old):
// in memory for the proxy's life and, when path is set, in a state file
// that a restarted proxy reads back. Each is kept beside the fingerprint
// of the Secret's refresh token it descends from: once the Secret holds
// another (an operator rotated it), the Secret's is used again and the
// rotated one forgotten. The proxy never writes the Kubernetes Secret,
// which would need API rights it does not have.
type refreshStore struct {
	path string

	mu     sync.Mutex
	tokens map[string]refreshRecord
}

// refreshRecord is one rotated refresh token, as the state file holds
// it.
type refreshRecord struct {
	// Seed is the SHA-256, in hex, of the Secret's refresh token this
	// one descends from.
	Seed  string `json:"seed"`
	Token string `json:"refreshToken"`
}

// maxStateFile bounds the state file the proxy reads.
const maxStateFile = 1 << 20

// newRefreshStore returns a store writing to path ("" for memory only),
// with what path holds already. A state file that cannot be read is
// reported and left for the next write to replace: the Secret's refresh
// tokens are used meanwhile.
func newRefreshStore(path string) (*refreshStore, error) {
	r := &refreshStore{path: path, tokens: map[string]refreshRecord{}}
	if path == "" {
		return r, nil
	}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return r, nil
	}
	if err != nil {
		return r, fmt.Errorf("state file %s: %w", path, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxStateFile+1))
	if err != nil {
		return r, fmt.Errorf("state file %s: %w", path, err)
	}
	tokens, err := parseRefreshState(b)
	if err != nil {
		return r, fmt.Errorf("state file %s: %w", path, err)
	}
	r.tokens = tokens
	return r, nil
}

// parseRefreshState reads a state file. Errors never quote it.
func parseRefreshState(b []byte) (map[string]refreshRecord, error) {
	if len(b) > maxStateFile {
		return nil, fmt.Errorf("larger than %d bytes", maxStateFile)
	}
	var st struct {
		RefreshTokens map[string]refreshRecord `json:"refreshTokens"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, errors.New("not the JSON object the proxy writes")
	}
	out := make(map[string]refreshRecord, len(st.RefreshTokens))
	for k, rec := range st.RefreshTokens {
		if len(rec.Seed) != 64 || rec.Token == "" {
			continue
		}
		out[k] = rec
	}
	return out, nil
}

// current returns the refresh token to send for key: the one rotated
// from seed, or seed itself.
func (r *refreshStore) current(key string, seed Secret) Secret {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rec, ok := r.tokens[key]; ok && rec.Seed == fingerprint(seed) {
		return Secret{v: rec.Token}
	}
	return seed
}

// rotated keeps tok as key's refresh token descending from seed, and
// writes the state file. The write replaces the file whole (a temporary
// file renamed over it), readable by the proxy's user only.
func (r *refreshStore) rotated(key string, seed, tok Secret) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tokens[key] = refreshRecord{Seed: fingerprint(seed), Token: tok.v}
	if r.path == "" {
		return nil
	}
	var st struct {
		RefreshTokens map[string]refreshRecord `json:"refreshTokens"`
	}
	st.RefreshTokens = r.tokens
	b, err := json.Marshal(st) // map keys sorted: the same tokens, the same bytes
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(r.path), ".refresh-*")
	if err != nil {
		return errors.New("cannot create a file beside the state file")
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return errors.New("cannot write the state file")
	}
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return errors.New("cannot make the state file private")
	}
	if err := tmp.Close(); err != nil {
		return errors.New("cannot write the state file")
	}
	if err := os.Rename(tmp.Name(), r.path); err != nil {
		return errors.New("cannot replace the state file")
	}
	return nil
}
