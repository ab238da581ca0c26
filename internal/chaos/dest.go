package chaos

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"sync"
	"time"
)

// Phase is one stretch of a Destination's schedule: every request is
// answered with Status for Lasts. With Share between 0 and 1 only that
// share of the requests is (evenly spread: 9 of every 10 for 0.9), and
// with Alt set every other of them is answered Alt instead (a brownout of
// 429s and 503s); the others are served.
type Phase struct {
	Status int
	Lasts  time.Duration
	Share  float64
	Alt    int
}

// Destination is the HTTP service the consumers write to, with answers the
// scenario controls. It stores a message by its Idempotency-Key: a repeat
// with the same body (Content-Digest) is answered 200 and not stored again;
// the same key with another body is answered 422 (the IETF idempotency-key
// draft), which the sink dead-letters. A body with "reject":true is refused
// for its content (422). It counts the stored messages by their "seq" field,
// and the attempts per key.
type Destination struct {
	mu       sync.Mutex
	start    time.Time
	schedule []Phase
	delay    time.Duration
	// keys maps an Idempotency-Key to the Content-Digest stored under it.
	keys     map[string]string
	stored   map[int]int // seq -> keys stored with it
	attempts map[string]int
	answers  map[int]int // status -> count
	inflight chan struct{}
	failKeys map[string]bool
	requests int // requests answered during a phase with a Share
}

// FailKey makes every request for key fail with 503 (a stuck message).
func (d *Destination) FailKey(key string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.failKeys == nil {
		d.failKeys = map[string]bool{}
	}
	d.failKeys[key] = true
}

// NewDestination returns a destination that follows schedule from now on,
// then answers normally.
func NewDestination(schedule []Phase) *Destination {
	return &Destination{
		start: time.Now(), schedule: schedule, keys: map[string]string{}, stored: map[int]int{},
		attempts: map[string]int{}, answers: map[int]int{}, inflight: make(chan struct{}, 1),
	}
}

// Restart starts the schedule again from now.
func (d *Destination) Restart(schedule []Phase) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.start, d.schedule = time.Now(), schedule
}

// SetDelay makes every answer take d (a slow destination).
func (d *Destination) SetDelay(delay time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.delay = delay
}

// InFlight receives a value each time a request arrives (dropped when
// nobody listens).
func (d *Destination) InFlight() <-chan struct{} { return d.inflight }

// scheduled returns the status the schedule imposes now (0: none).
func (d *Destination) scheduled() int {
	at := time.Since(d.start)
	for _, p := range d.schedule {
		if at < p.Lasts {
			return d.share(p)
		}
		at -= p.Lasts
	}
	return 0
}

// share returns the status of the next request in phase p: the faults are
// spread evenly over the requests (request i fails when the count of
// faults floor(i*Share) steps up), alternating Status and Alt.
func (d *Destination) share(p Phase) int {
	if p.Share <= 0 || p.Share >= 1 {
		return p.Status
	}
	i := d.requests
	d.requests++
	n := int(float64(i+1) * p.Share)
	if n == int(float64(i)*p.Share) {
		return 0
	}
	if p.Alt != 0 && n%2 == 0 {
		return p.Alt
	}
	return p.Status
}

// ServeHTTP answers one POST.
func (d *Destination) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	select {
	case d.inflight <- struct{}{}:
	default:
	}
	body, _ := io.ReadAll(r.Body)
	key, digest := r.Header.Get("Idempotency-Key"), r.Header.Get("Content-Digest")
	d.mu.Lock()
	delay := d.delay
	d.attempts[key]++
	status := d.scheduled()
	if d.failKeys[key] {
		status = http.StatusServiceUnavailable
	}
	d.mu.Unlock()
	if delay > 0 {
		time.Sleep(delay)
	}
	if status == 0 {
		status = d.store(key, digest, body)
	}
	d.mu.Lock()
	d.answers[status]++
	d.mu.Unlock()
	switch {
	case status >= 300 && status < 400:
		w.Header().Set("Location", "/elsewhere")
		w.WriteHeader(status)
	case status == http.StatusUnprocessableEntity && d.collides(key, digest):
		http.Error(w, "idempotency key reused with a different body: id collision", status)
	case status >= 400:
		http.Error(w, fmt.Sprintf("answer %d", status), status)
	default:
		w.WriteHeader(status)
	}
}

// store stores a message and returns the answer: 200, or 422 for a refused
// body or an id collision.
func (d *Destination) store(key, digest string, body []byte) int {
	var v struct {
		Seq    *int `json:"seq"`
		Reject bool `json:"reject"`
	}
	if json.Unmarshal(body, &v) != nil || v.Seq == nil || v.Reject {
		return http.StatusUnprocessableEntity
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if old, ok := d.keys[key]; ok {
		if old != digest {
			return http.StatusUnprocessableEntity
		}
		return http.StatusOK
	}
	d.keys[key] = digest
	d.stored[*v.Seq]++
	return http.StatusOK
}

func (d *Destination) collides(key, digest string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	old, ok := d.keys[key]
	return ok && old != digest
}

// Stored returns, per seq, how many keys stored it.
func (d *Destination) Stored() map[int]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.stored)
}

// MaxAttempts returns the most requests made for one key.
func (d *Destination) MaxAttempts() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, a := range d.attempts {
		n = max(n, a)
	}
	return n
}

// Answers returns how often each status was answered.
func (d *Destination) Answers() map[int]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.answers)
}
