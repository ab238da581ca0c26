package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"

	"github.com/sluice-dev/sluice/functions/controller/invocation"
	"github.com/sluice-dev/sluice/internal/e2e/controller/harness"
	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/internal/testfile"
	"github.com/sluice-dev/sluice/pkg/adapter/awsconf"
	"github.com/sluice-dev/sluice/pkg/adapter/cwmetric"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbloop"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbstore/ddbtest"
	"github.com/sluice-dev/sluice/pkg/loop"
)

// TestBootstrapUnderRIE builds the real bootstrap, runs it under two Runtime
// Interface Emulators against the local AWS endpoint, and ticks it with the
// scheduled-event payload: once alone, then twice at the same time.
func TestBootstrapUnderRIE(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the bootstrap and starts emulators")
	}
	endpoint := testenv.AWSEndpoint(t)
	rie := testenv.Binary(t, "SLUICE_RIE_BIN", "aws-lambda-rie")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	dir := t.TempDir()
	bootstrap := filepath.Join(dir, "bootstrap")
	build := exec.CommandContext(ctx, "go", "build", "-tags", "lambda.norpc", "-o", bootstrap, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	cfg, err := awsconf.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	client, table := ddbtest.Table(t, "sluice-rie")
	store := ddbloop.New(client, table)
	db := table + "-db"
	params := map[string]any{"setpoint": 70.0, "kp": 1.0, "ki": 0.05, "min_rate": 10.0, "max_rate": 1000.0,
		"tick_period": "1s", "rate_ttl": "3s", "metric_dimensions": map[string]any{"DBInstanceIdentifier": db}}
	if err := store.WriteParams(ctx, "rie", params); err != nil {
		t.Fatal(err)
	}
	cw := cwmetric.NewClient(cfg, endpoint)
	_, err = cw.PutMetricData(ctx, &cloudwatch.PutMetricDataInput{Namespace: aws.String("AWS/RDS"), MetricData: []cwtypes.MetricDatum{{
		MetricName: aws.String("CPUUtilization"), Value: aws.Float64(50), Timestamp: aws.Time(time.Now().Add(-2 * time.Minute)),
		Dimensions: []cwtypes.Dimension{{Name: aws.String("DBInstanceIdentifier"), Value: aws.String(db)}},
	}}})
	if err != nil {
		t.Fatal(err)
	}

	env := []string{"SLUICE_TABLE=" + table, "AWS_ENDPOINT_URL=" + endpoint}
	var ries []*harness.RIE
	for i := range 2 {
		r, err := harness.StartRIE(ctx, rie, bootstrap, dir, fmt.Sprintf("rie-%d", i), env)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.Stop)
		ries = append(ries, r)
	}
	payload := testfile.Read(t, "testdata/scheduled-event.json")
	invoke := func(r *harness.RIE) invocation.Result {
		body, err := r.Invoke(ctx, payload)
		if err != nil {
			t.Fatalf("invoke: %v", err)
		}
		var res invocation.Result
		if err := json.Unmarshal(body, &res); err != nil {
			t.Fatalf("response %s: %v", body, err)
		}
		return res
	}

	first := invoke(ries[0])
	if first.Applied["rie"] != 1 || first.RateWrites != 1 {
		t.Fatalf("first invocation = %+v; want loop rie applied at tick 1 with its rate written", first)
	}
	rate, err := store.ReadRate(ctx, "rie")
	if err != nil || rate.Tick != 1 || rate.PerSecond < 10 || rate.PerSecond > 1000 {
		t.Fatalf("RATE = %+v, %v; want tick 1 within [10, 1000]", rate, err)
	}

	time.Sleep(1100 * time.Millisecond) // the loop's tick period is 1 s
	var wg sync.WaitGroup
	results := make([]invocation.Result, 2)
	for i, r := range ries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = invoke(r)
		}()
	}
	wg.Wait()
	applied := 0
	for _, res := range results {
		if v, ok := res.Applied["rie"]; ok {
			applied++
			if v != 2 {
				t.Errorf("concurrent tick applied version %d; want 2", v)
			}
		}
	}
	if applied != 1 {
		t.Errorf("concurrent invocations applied the tick %d times (%+v); want once", applied, results)
	}
	st, err := store.ReadState(ctx, "rie")
	if err != nil || st.Version != 2 {
		t.Errorf("STATE = %+v, %v; want version 2", st, err)
	}
	if status, err := store.ReadStatus(ctx, "rie"); err != nil || status.Status != loop.StatusApplied {
		t.Errorf("PARAMS_STATUS = %+v, %v; want applied", status, err)
	}
}
