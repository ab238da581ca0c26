// Command bench-sqs measures SQS send and receive+delete throughput on
// several SQS servers in one run (internal/bench/sqsthroughput), by default
// ElasticMQ and moto_server of the local stack, and prints a table on
// stderr and, as its last line on stdout, one JSON object with each
// server's rates and the ratios of the first server's rates to each other's.
//
//	bench-sqs [--messages 1000] [--servers elasticmq=http://127.0.0.1:9324,moto=http://127.0.0.1:4566]
//
// `make bench-sqs` starts the two servers (localstack/stack/up.sh) and runs
// it.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sluice-dev/sluice/internal/bench/sqsthroughput"
	"github.com/sluice-dev/sluice/internal/e2e/e2ekit"
	"github.com/sluice-dev/sluice/pkg/adapter/awsconf"
)

type server struct{ name, endpoint string }

type report struct {
	Messages int                           `json:"messages"`
	Results  []sqsthroughput.Result        `json:"results"`
	Ratios   map[string]map[string]float64 `json:"ratios"`
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench-sqs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	messages := fs.Int("messages", 1000, "messages per server")
	list := fs.String("servers", "elasticmq=http://127.0.0.1:9324,moto=http://127.0.0.1:4566",
		"name=endpoint pairs, comma-separated; ratios are the first server's rates over each other's")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	servers, err := parseServers(*list)
	if err != nil || *messages <= 0 {
		fmt.Fprintf(stderr, "bench-sqs: --servers %q, --messages %d: %v\n", *list, *messages, err)
		return 2
	}
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1"} {
		if os.Getenv(k) == "" {
			os.Setenv(k, v)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cfg, err := awsconf.Load(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "bench-sqs: %v\n", err)
		return 1
	}
	rep := report{Messages: *messages, Ratios: map[string]map[string]float64{}}
	fmt.Fprintf(stderr, "%-10s %-24s %9s %14s %22s\n", "server", "endpoint", "messages", "sent msg/s", "received+deleted msg/s")
	for _, s := range servers {
		// Each server by its endpoint, whatever AWS_ENDPOINT_URL_SQS says.
		api := sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(s.endpoint) })
		name := fmt.Sprintf("sluice-bench-sqs-%s-%d", s.name, time.Now().UnixNano())
		r, err := sqsthroughput.Measure(ctx, api, name, *messages)
		if err != nil {
			fmt.Fprintf(stderr, "bench-sqs: %s (%s): %v\n", s.name, s.endpoint, err)
			return 1
		}
		r.Server, r.Endpoint = s.name, s.endpoint
		fmt.Fprintf(stderr, "%-10s %-24s %9d %14.0f %22.0f\n", r.Server, r.Endpoint, r.Messages, r.SendPerSecond, r.ReceiveDeletePerSec)
		rep.Results = append(rep.Results, r)
	}
	first := rep.Results[0]
	for _, r := range rep.Results[1:] {
		rep.Ratios[first.Server+"/"+r.Server] = map[string]float64{
			"send":           e2ekit.Round(first.SendPerSecond/r.SendPerSecond, 1),
			"receive_delete": e2ekit.Round(first.ReceiveDeletePerSec/r.ReceiveDeletePerSec, 1),
		}
	}
	b, _ := json.Marshal(rep)
	fmt.Fprintln(stdout, string(b))
	return 0
}

// parseServers reads name=endpoint pairs.
func parseServers(list string) ([]server, error) {
	var out []server
	for _, f := range strings.Split(list, ",") {
		name, ep, ok := strings.Cut(strings.TrimSpace(f), "=")
		if !ok || name == "" || !strings.HasPrefix(ep, "http") {
			return nil, fmt.Errorf("%q is not name=http://host:port", f)
		}
		out = append(out, server{name, ep})
	}
	return out, nil
}
