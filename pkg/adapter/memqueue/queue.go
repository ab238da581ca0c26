// Package memqueue is an in-memory message source and sink for the embedded
// demo and for tests: a Queue with in-flight tracking, redelivery and a
// dead-letter list, and a Sink that stores by message id (idempotent) and
// fails on demand.
package memqueue

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/sluice-dev/sluice/pkg/consume"
)

var (
	_ consume.Source       = (*Queue)(nil)
	_ consume.DeadLetterer = (*Queue)(nil)
)

// Queue is an in-memory queue. Received messages are in flight until
// acknowledged (deleted), released (back at the head of the queue, their
// receive count grown) or dead-lettered. Safe for concurrent use.
type Queue struct {
	mu       sync.Mutex
	ready    []consume.Message
	inflight map[string]consume.Message
	dead     []consume.Poison
	acked    int
	next     int
	wake     chan struct{}
}

// New returns an empty queue.
func New() *Queue {
	return &Queue{inflight: map[string]consume.Message{}, wake: make(chan struct{})}
}

// Send enqueues a message with body and returns its id (m-1, m-2, ...).
func (q *Queue) Send(body []byte) string {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.next++
	id := "m-" + strconv.Itoa(q.next)
	q.ready = append(q.ready, consume.Message{ID: id, Body: body})
	q.signal()
	return id
}

// signal wakes blocked receivers; q.mu must be held.
func (q *Queue) signal() {
	close(q.wake)
	q.wake = make(chan struct{})
}

// Receive returns up to max ready messages, blocking until there is at
// least one or ctx ends (then it returns no messages and no error).
func (q *Queue) Receive(ctx context.Context, max int) ([]consume.Message, error) {
	for {
		q.mu.Lock()
		if len(q.ready) > 0 {
			n := min(max, len(q.ready))
			out := make([]consume.Message, n)
			copy(out, q.ready[:n])
			q.ready = q.ready[n:]
			for i := range out {
				out[i].ReceiveCount++
				q.inflight[out[i].ID] = out[i]
			}
			q.mu.Unlock()
			return out, nil
		}
		wake := q.wake
		q.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, nil
		case <-wake:
		}
	}
}

func (q *Queue) take(msgs []consume.Message) ([]consume.Message, error) {
	out := make([]consume.Message, 0, len(msgs))
	for _, m := range msgs {
		cur, ok := q.inflight[m.ID]
		if !ok {
			return out, fmt.Errorf("message %s is not in flight", m.ID)
		}
		delete(q.inflight, m.ID)
		out = append(out, cur)
	}
	return out, nil
}

// Ack deletes stored messages.
func (q *Queue) Ack(_ context.Context, msgs []consume.Message) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	got, err := q.take(msgs)
	q.acked += len(got)
	return err
}

// Release puts messages back at the head of the queue.
func (q *Queue) Release(_ context.Context, msgs []consume.Message) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	got, err := q.take(msgs)
	q.ready = append(got, q.ready...)
	if len(got) > 0 {
		q.signal()
	}
	return err
}

// DeadLetter moves poison messages to the dead-letter list.
func (q *Queue) DeadLetter(_ context.Context, poison []consume.Poison) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, p := range poison {
		if _, err := q.take([]consume.Message{p.Message}); err != nil {
			return err
		}
		q.dead = append(q.dead, p)
	}
	return nil
}

// Counts reports the messages ready, in flight, acknowledged and dead-lettered.
func (q *Queue) Counts() (ready, inflight, acked, dead int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.ready), len(q.inflight), q.acked, len(q.dead)
}

// Dead returns a copy of the dead-letter list.
func (q *Queue) Dead() []consume.Poison {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]consume.Poison(nil), q.dead...)
}
