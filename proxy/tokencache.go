package proxy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// tokenCache keeps the tokens the proxy obtains from an authorization
// server (OAuth 2.0, Google, a GitHub App's installation tokens), one per
// scope key, and renews each before it expires. Concurrent requests that find a token missing or due share one
// exchange (a flight): the first starts it, in a goroutine of its own
// bounded by mintTimeout, and every request waits for it at most
// flightWait, so a stalled token endpoint holds no request longer than
// that, and no lock is held across the network call.
type tokenCache struct {
	now func() time.Time
	// flightWait bounds how long a request waits for an exchange.
	flightWait time.Duration
	// retry, when set, is how long a failed exchange's error answers
	// the requests of its key before the server is asked again: a
	// sandbox sending requests as fast as it can, while the server
	// refuses, would otherwise have the proxy ask it as fast as it
	// answers.
	retry time.Duration
	// useExpired has a token the proxy's clock finds expired on arrival
	// serve the requests that waited for it, and the next request ask
	// for another, rather than fail: a server whose clock runs behind
	// the proxy's hands out such tokens, and they still work there.
	useExpired bool

	mu      sync.Mutex
	entries map[string]*tokenEntry
}

// tokenEntry is one scope key's token and the exchange under way, if
// any; the cache's mutex guards it.
type tokenEntry struct {
	token   Secret
	expires time.Time
	renewAt time.Time
	flight  *tokenFlight
	used    time.Time // for eviction
	// staleAt is when a refused token last started an exchange.
	staleAt time.Time
	// failed is the last exchange's error, given until failedUntil
	// without another exchange (tokenCache.retry).
	failed      error
	failedUntil time.Time
}

// tokenFlight is one exchange; done closes when its fields are set.
type tokenFlight struct {
	done    chan struct{}
	token   Secret
	expires time.Time
	err     error
}

// exchange obtains a token and the time it expires (zero when the
// server said nothing). Its errors name no secret.
type exchange func(ctx context.Context) (Secret, time.Time, error)

// defaultTokenLife is how long a token whose server gave no expiry is
// used before another is asked for; an upstream's 401 renews it sooner.
const defaultTokenLife = 10 * time.Minute

// errFlightWait is an exchange that did not end within flightWait.
var errFlightWait = errors.New("the token endpoint did not answer in time")

// staleGap is how long after a refused token started an exchange another
// refusal may start one: an upstream that answers 401 whatever the
// token (a path the token's scopes do not cover) would otherwise have
// every request of the sandbox's ask the token endpoint for a token.
const staleGap = time.Second

// errRenewedRecently is a refused token not replaced because one was
// replaced less than staleGap ago.
var errRenewedRecently = errors.New("a refused token was replaced less than a second ago")

func newTokenCache() *tokenCache {
	return &tokenCache{now: time.Now, flightWait: mintTimeout, entries: map[string]*tokenEntry{}}
}

// get returns key's token, exchanging for one when there is none, it is
// due for renewal, or it is stale: the token an upstream just refused,
// which is replaced unless another request replaced it already. A
// renewal that fails while the token is still valid for a second returns
// the token; the next request tries again. fresh reports whether the
// token came from this call's exchange (for the metrics).
func (c *tokenCache) get(key string, stale *Secret, ex exchange) (tok Secret, fresh bool, err error) {
	c.mu.Lock()
	e := c.entries[key]
	if e == nil {
		c.evict()
		e = &tokenEntry{}
		c.entries[key] = e
	}
	now := c.now()
	e.used = now
	staleNow := stale != nil && e.token.v == stale.v
	if e.token.v != "" && now.Before(e.renewAt) && !staleNow {
		tok = e.token
		c.mu.Unlock()
		return tok, false, nil
	}
	f := e.flight
	if f == nil && staleNow && now.Sub(e.staleAt) < staleGap {
		c.mu.Unlock()
		return Secret{}, false, errRenewedRecently
	}
	if f == nil && e.failed != nil && now.Before(e.failedUntil) {
		defer c.mu.Unlock()
		if e.token.v != "" && !staleNow && now.Add(time.Second).Before(e.expires) {
			return e.token, false, nil
		}
		return Secret{}, false, e.failed
	}
	if f == nil {
		if staleNow {
			e.staleAt = now
		}
		f = &tokenFlight{done: make(chan struct{})}
		e.flight = f
		go c.fly(e, f, ex)
	}
	c.mu.Unlock()

	timer := time.NewTimer(c.flightWait)
	defer timer.Stop()
	select {
	case <-f.done:
	case <-timer.C:
		c.mu.Lock()
		defer c.mu.Unlock()
		if e.token.v != "" && !staleNow && c.now().Add(time.Second).Before(e.expires) {
			return e.token, false, nil
		}
		return Secret{}, false, errFlightWait
	}
	if f.err != nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		if e.token.v != "" && !staleNow && c.now().Add(time.Second).Before(e.expires) {
			return e.token, false, nil
		}
		return Secret{}, false, f.err
	}
	return f.token, true, nil
}

// fly runs one exchange and stores its token.
func (c *tokenCache) fly(e *tokenEntry, f *tokenFlight, ex exchange) {
	ctx, cancel := context.WithTimeout(context.Background(), mintTimeout)
	defer cancel()
	tok, expires, err := ex(ctx)
	now := c.now()
	if err == nil && expires.IsZero() {
		expires = now.Add(defaultTokenLife)
	}
	if err == nil && !now.Before(expires) && !c.useExpired {
		err = fmt.Errorf("the token endpoint sent a token that has already expired (at %s)", expires.UTC().Format(time.RFC3339))
	}
	f.token, f.expires, f.err = tok, expires, err
	c.mu.Lock()
	if err == nil {
		e.token, e.expires = tok, expires
		ahead := min(renewAhead, max(expires.Sub(now), 0)/2)
		e.renewAt = expires.Add(-ahead)
		e.failed = nil
	} else if c.retry > 0 {
		e.failed, e.failedUntil = err, now.Add(c.retry)
	}
	e.flight = nil
	c.mu.Unlock()
	close(f.done)
}

// evict drops the least recently used entry when the cache is full;
// the caller holds c.mu.
func (c *tokenCache) evict() {
	if len(c.entries) < maxMintEntries {
		return
	}
	var oldest string
	var at time.Time
	for k, e := range c.entries {
		if e.flight == nil && (oldest == "" || e.used.Before(at)) {
			oldest, at = k, e.used
		}
	}
	if oldest != "" {
		delete(c.entries, oldest)
	}
}
