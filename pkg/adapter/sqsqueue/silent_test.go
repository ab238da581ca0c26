package sqsqueue_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sluice-dev/sluice/pkg/adapter/sqsqueue"
)

// silentEndpoint accepts connections and never answers on them (no RST,
// no FIN: a frozen endpoint or a dead NAT entry); it returns its URL.
func silentEndpoint(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	return "http://" + ln.Addr().String()
}

// TestQueueCallsOnASilentEndpointReturn: a receive (the worker's, whose
// context has no deadline) and a depth read on an SQS endpoint that
// accepts and never answers return an error once their wait and
// CallTimeout are past, so that the caller retries on a new connection
// instead of waiting on the silent one for ever. The watchdog only turns a
// hang into a failure; it bounds nothing the test asserts.
func TestQueueCallsOnASilentEndpointReturn(t *testing.T) {
	c := sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(silentEndpoint(t)), Credentials: aws.AnonymousCredentials{}})
	q := sqsqueue.New(c, sqsqueue.Config{QueueURL: "http://sqs.local/000000000000/q", WaitTime: time.Second, CallTimeout: time.Second}, nil)
	defer q.Close()
	for name, call := range map[string]func() error{
		"Receive": func() error { _, err := q.Receive(context.Background(), 10); return err },
		"Depth":   func() error { _, err := q.Depth(context.Background()); return err },
	} {
		done := make(chan error, 1)
		go func() { done <- call() }()
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("%s on a silent endpoint returned no error", name)
			}
		case <-time.After(2 * time.Minute):
			t.Fatalf("%s on a silent endpoint has not returned after 2 minutes: it waits on the connection for ever", name)
		}
	}
}
