package main

import (
	"context"
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/pkg/adapter/awsconf"
	"github.com/sluice-dev/sluice/pkg/adapter/cwmetric"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbloop"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbstore"
	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/loop/looptest"
	"github.com/sluice-dev/sluice/pkg/metric"
)

// aurora publishes AWS/RDS CPUUtilization as CloudWatch does for an
// Aurora cluster: per instance (DBInstanceIdentifier) and per role of the
// cluster (DBClusterIdentifier + Role), the WRITER series carrying the
// writer's value.
type aurora struct {
	t       *testing.T
	cw      *cloudwatch.Client
	cluster string
}

func (a aurora) put(at time.Time, metricName string, dims map[string]string, v float64) {
	a.t.Helper()
	var d []types.Dimension
	for _, k := range slices.Sorted(maps.Keys(dims)) { // moto matches dimensions in order; the reader sorts them
		d = append(d, types.Dimension{Name: aws.String(k), Value: aws.String(dims[k])})
	}
	_, err := a.cw.PutMetricData(context.Background(), &cloudwatch.PutMetricDataInput{Namespace: aws.String("AWS/RDS"),
		MetricData: []types.MetricDatum{{MetricName: aws.String(metricName), Dimensions: d, Timestamp: aws.Time(at),
			Value: aws.Float64(v), Unit: types.StandardUnitPercent}}})
	if err != nil {
		a.t.Fatalf("PutMetricData: %v", err)
	}
}

// minute publishes one minute: writer's and reader's CPU, by instance and
// by role.
func (a aurora) minute(at time.Time, writer, reader string, writerCPU, readerCPU float64) {
	const cpu = "CPUUtilization"
	a.put(at, cpu, map[string]string{"DBInstanceIdentifier": writer}, writerCPU)
	a.put(at, cpu, map[string]string{"DBInstanceIdentifier": reader}, readerCPU)
	a.put(at, cpu, map[string]string{"DBClusterIdentifier": a.cluster, "Role": "WRITER"}, writerCPU)
	a.put(at, cpu, map[string]string{"DBClusterIdentifier": a.cluster, "Role": "READER"}, readerCPU)
}

// documentedLoop runs the Aurora put-item command of docs/controller.md
// on the local DynamoDB (its own table; the cluster named cluster) and
// returns the item decoded as the controller decodes it.
func documentedLoop(t *testing.T, cfg aws.Config, cluster string) loop.Params {
	t.Helper()
	ctx := context.Background()
	blocks, err := docBlocks("../../../docs/controller.md", docSection, "sh")
	if err != nil {
		t.Fatal(err)
	}
	table := fmt.Sprintf("sl-aurora-%d", time.Now().UnixNano())
	ddb := dynamodb.NewFromConfig(cfg)
	if err := ddbstore.CreateTable(ctx, ddb, table); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ddb.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	ran := 0
	for _, b := range blocks {
		if !strings.Contains(b, "aws dynamodb put-item") {
			continue
		}
		cmd := substitute(b, map[string]string{"--table-name sluice": "--table-name " + table, "orders-cluster": cluster})
		if out, err := exec.Command("bash", "-euc", cmd).CombinedOutput(); err != nil {
			t.Fatalf("documented command\n%s: %v: %s", b, err, out)
		}
		ran++
	}
	if ran != 1 {
		t.Fatalf("%d put-item commands in the RDS section; want the one Aurora loop", ran)
	}
	attrs, err := ddbloop.New(ddb, table).ReadParams(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	p, err := loop.DecodeParams("orders", attrs, looptest.Sources())
	if err != nil {
		t.Fatalf("the documented item is refused: %v", err)
	}
	return p
}

// TestAuroraLoopFollowsTheWriter: the documented loop, whose
// metric_dimensions are the cluster and Role=WRITER, reads the writer's
// CPU before and after a failover (the instances swap roles), and its
// replica_lag signal the reader's AuroraReplicaLag; a loop that names the
// first writer's instance reads a reader after the failover.
func TestAuroraLoopFollowsTheWriter(t *testing.T) {
	ep := testenv.AWSEndpoint(t)
	if _, err := exec.LookPath("aws"); err != nil {
		t.Skip("the aws CLI is not installed: cannot run the documented command")
	}
	ctx := context.Background()
	cfg, err := awsconf.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cw := cwmetric.NewClient(cfg, ep)
	a := aurora{t: t, cw: cw, cluster: fmt.Sprintf("orders-%d", time.Now().UnixNano())}
	one, two := a.cluster+"-instance-1", a.cluster+"-instance-2"
	writer := documentedLoop(t, cfg, a.cluster)
	if len(writer.Signals) != 1 || writer.Signals[0].Name != "replica_lag" {
		t.Fatalf("documented loop's signals = %+v; want replica_lag", writer.Signals)
	}
	lag := writer.Signals[0].Metric
	pinned, err := loop.DecodeParams("orders", map[string]any{"setpoint": 70.0, "kp": 2.0, "ki": 0.05, "min_rate": 10.0,
		"max_rate": 1000.0, "metric_dimensions": map[string]any{"DBInstanceIdentifier": one}}, looptest.Sources())
	if err != nil {
		t.Fatal(err)
	}

	now := time.Now().UTC().Truncate(time.Minute)
	before, failover := now.Add(-6*time.Minute), now.Add(-3*time.Minute)
	a.minute(before, one, two, 82, 15)   // instance-1 writes
	a.minute(failover, two, one, 76, 12) // failover: instance-2 writes, instance-1 is a reader
	// Two readers' lag in the READER series; the signal reads the worst.
	readers := map[string]string{"DBClusterIdentifier": a.cluster, "Role": "READER"}
	a.put(before, "AuroraReplicaLag", readers, 25)
	a.put(before.Add(time.Second), "AuroraReplicaLag", readers, 40)
	a.put(failover, "AuroraReplicaLag", readers, 1500)
	a.put(failover.Add(time.Second), "AuroraReplicaLag", readers, 300)
	for _, tt := range []struct {
		name               string
		at                 time.Time
		writer, pinned, ms float64
	}{
		{"before the failover", before.Add(time.Minute), 82, 82, 40},
		{"after the failover", failover.Add(time.Minute), 76, 12, 1500},
	} {
		got, err := cwmetric.New(cw).ReadMetrics(ctx, []metric.Query{writer.Metric, pinned.Metric, lag}, tt.at)
		if err != nil {
			t.Fatalf("%s: ReadMetrics: %v", tt.name, err)
		}
		for i, want := range []float64{tt.writer, tt.pinned, tt.ms} {
			if !got[i].Found || got[i].Value != want {
				t.Errorf("%s: query %d (%v) reads %+v; want %v", tt.name, i, []string{"cluster+WRITER", "pinned to " + one, "READER lag"}[i], got[i], want)
			}
		}
	}
}
