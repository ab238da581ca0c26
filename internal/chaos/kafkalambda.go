package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluice-dev/sluice/internal/e2e/controller/harness"
	"github.com/sluice-dev/sluice/internal/localaws"
)

// PathKafkaLambda is the Kafka consumer Lambda's path: the real
// kafka-consumer bootstrap under the emulator behind the stand-in for
// Lambda's Kafka event source mapping (localaws.KafkaPoller), on the real
// broker; poison records go to the dead-letter topic.
const PathKafkaLambda = "kafka-lambda"

// KafkaLambda is what the kafka-lambda path runs.
type KafkaLambda struct {
	// Bootstrap is the built functions/kafka-consumer; RIE the emulator.
	Bootstrap, RIE string
	// Log receives the function's output (nil: discarded).
	Log *os.File
}

// KafkaLambdaScenarios are the scenarios the kafka-lambda path plays: the
// destination's outages and answers, with poison records. (A record the
// destination fails for ever holds its partition on this path, as on
// Lambda, until the mapping's on-failure destination takes the batch: the
// worker's kafka-stuck-record scenario does not apply.)
func KafkaLambdaScenarios(s Size, l *KafkaLambda) []KafkaScenario {
	var out []KafkaScenario
	for _, sc := range KafkaScenarios(s) {
		if sc.Stuck < 0 && sc.Collisions == 0 {
			sc.Lambda = l
			out = append(out, sc)
		}
	}
	return out
}

// consumeLambda runs the function under the emulator behind one mapping
// member reading every partition, until await is satisfied.
func (k *kafkaRun) consumeLambda(ctx context.Context, sc KafkaScenario, poison int, destURL string) (time.Duration, error) {
	fn, url, err := k.startFunction(sc, destURL)
	if err != nil {
		return 0, err
	}
	defer func() { fn.Process.Kill(); fn.Wait() }()
	cl, err := localaws.NewKafkaClient(k.brokers, k.topic+"-g", []string{k.topic})
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	p := &localaws.KafkaPoller{Client: cl, Invoker: countingInvoker{inner: &localaws.RIE{URL: url}, sw: k.sw}, BatchSize: 100,
		RetryWait: 500 * time.Millisecond, Enabled: k.sw.enabled, Every: 100 * time.Millisecond}
	pctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); p.Run(pctx) }()
	defer func() { stop(); <-done }()
	adm := kadm.NewClient(k.cl)
	return k.await(ctx, sc, poison, func() int64 {
		ends, err := adm.ListEndOffsets(ctx, k.topic+".dlt")
		if err != nil {
			return 0
		}
		var n int64
		ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
		return n
	})
}

// startFunction starts the emulator with the bootstrap, its sink the
// scenario's destination, its rate the scenario's (the safe rate: no RATE
// item is reachable).
func (k *kafkaRun) startFunction(sc KafkaScenario, destURL string) (*exec.Cmd, string, error) {
	args, port, err := harness.RIEArgs(sc.Lambda.Bootstrap)
	if err != nil {
		return nil, "", err
	}
	cmd := exec.Command(sc.Lambda.RIE, args...)
	cmd.Env = append(os.Environ(), "AWS_ENDPOINT_URL=http://127.0.0.1:1", "AWS_MAX_ATTEMPTS=1", "AWS_ACCESS_KEY_ID=test",
		"AWS_SECRET_ACCESS_KEY=test", "AWS_REGION=us-east-1", "AWS_LAMBDA_FUNCTION_TIMEOUT=30",
		"SLUICE_SAFE_RATE="+strconv.FormatFloat(sc.Rate, 'f', -1, 64), "SLUICE_KAFKA_DLT="+k.topic+".dlt",
		"SLUICE_KAFKA_BROKERS="+strings.Join(k.brokers, ","), "SLUICE_SINK="+k.sinkName())
	if k.db != nil {
		cmd.Env = append(cmd.Env, "SLUICE_MYSQL_DSN="+k.db.DSN())
	} else {
		cmd.Env = append(cmd.Env, "SLUICE_HTTP_ENDPOINTS="+destURL)
	}
	if sc.Lambda.Log != nil {
		cmd.Stdout, cmd.Stderr = sc.Lambda.Log, sc.Lambda.Log
	}
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("start %s: %w", sc.Lambda.RIE, err)
	}
	return cmd, "http://127.0.0.1:" + strconv.Itoa(port), nil
}
