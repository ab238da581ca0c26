package kafka

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sluice-dev/sluice/internal/e2e/controller/harness"
	"github.com/sluice-dev/sluice/internal/localaws"
)

// LambdaPath is the kafka-lambda scenario's name in the no_loss table.
const LambdaPath = "kafka-lambda"

// Lambda configures the kafka-lambda path: each member of the emulated
// event source mapping is a Runtime Interface Emulator running the
// functions/kafka-consumer bootstrap, and a localaws.KafkaPoller in this
// process that reads the topic in the scenario's consumer group and
// invokes it. The faults are the workers': a second member joins (a
// rebalance); the first member's emulator and function are SIGKILLed
// mid-batch and its poller leaves without committing; MariaDB restarts.
type Lambda struct {
	// Bootstrap is the kafka-consumer bootstrap (see BuildLambda); RIE the
	// aws-lambda-rie binary.
	Bootstrap, RIE string
	// BatchSize is the mapping's batch size (default 100).
	BatchSize int
}

// BuildLambda builds functions/kafka-consumer as a Lambda bootstrap
// (CGO_ENABLED=0, -tags lambda.norpc) from the module at moduleDir into dir.
func BuildLambda(ctx context.Context, moduleDir, dir string) (string, error) {
	bin := filepath.Join(dir, "bootstrap")
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", "lambda.norpc", "-o", bin, "./functions/kafka-consumer")
	cmd.Dir = moduleDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build functions/kafka-consumer: %w\n%s", err, out)
	}
	return bin, nil
}

// lambdaMember is one member of the emulated mapping.
type lambdaMember struct {
	name string
	rie  *exec.Cmd
	stop context.CancelFunc
	done chan struct{}
}

// startLambda starts an emulator with the bootstrap and a poller invoking it.
func (s *scenario) startLambda(name string) error {
	args, port, err := harness.RIEArgs(s.cfg.Lambda.Bootstrap)
	if err != nil {
		return err
	}
	rie := exec.Command(s.cfg.Lambda.RIE, args...)
	rie.Env = append(s.functionEnv(), "AWS_LAMBDA_FUNCTION_TIMEOUT=30", "SLUICE_KAFKA_DLT="+s.topic+".dlt")
	rie.Stdout, rie.Stderr = s.cfg.WorkerLog, s.cfg.WorkerLog
	if err := rie.Start(); err != nil {
		return fmt.Errorf("start emulator %s: %w", name, err)
	}
	m := &lambdaMember{name: name, rie: rie, done: make(chan struct{})}
	s.lambdas = append(s.lambdas, m)
	cl, err := localaws.NewKafkaClient(s.cfg.Brokers, s.topic, []string{s.topic})
	if err != nil {
		return err
	}
	ctx, stop := context.WithCancel(context.Background())
	m.stop = stop
	p := &localaws.KafkaPoller{Client: cl, Invoker: &localaws.RIE{URL: "http://127.0.0.1:" + strconv.Itoa(port)},
		BatchSize: s.cfg.Lambda.BatchSize, RetryWait: time.Second, Log: s.cfg.Log.With("member", name)}
	go func() {
		defer close(m.done)
		defer cl.Close()
		p.Run(ctx)
	}()
	s.cfg.Log.Info("mapping member started", "name", name, "emulator", rie.Process.Pid)
	return nil
}

// functionEnv is the environment of a worker or a function.
func (s *scenario) functionEnv() []string {
	env := append(os.Environ(),
		"SLUICE_SINK=mysql", "SLUICE_MYSQL_DSN="+s.dsn,
		"SLUICE_KAFKA_BROKERS="+strings.Join(s.cfg.Brokers, ","), "SLUICE_LOOP=bench-"+s.run,
		"SLUICE_SAFE_RATE="+strconv.FormatFloat(s.cfg.Rate, 'f', -1, 64), "SLUICE_CONSUMERS="+strconv.Itoa(s.peers()))
	if os.Getenv("AWS_ENDPOINT_URL") == "" {
		// No local AWS: the RATE read fails at once and the safe rate holds.
		env = append(env, "AWS_ENDPOINT_URL=http://127.0.0.1:1", "AWS_MAX_ATTEMPTS=1",
			"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_REGION=us-east-1")
	}
	return env
}

// peers is how many consumers share the rate: 2 in the no-loss scenario
// (two workers or mapping members at most at a time), the partitions in a
// pacing run (one invocation per partition, as Lambda runs them).
func (s *scenario) peers() int {
	if s.pacing {
		return int(s.cfg.Partitions)
	}
	return 2
}

// killLambda SIGKILLs member i's emulator (and its function) and stops its
// poller: the batch in flight fails and is not committed; the group's
// other members get its partitions from the last commit.
func (s *scenario) killLambda(i int) {
	m := s.lambdas[i]
	_ = m.rie.Process.Signal(syscall.SIGKILL)
	_ = m.rie.Wait()
	m.stop()
	<-m.done
}

// stopLambdas stops every member's poller, then its emulator.
func (s *scenario) stopLambdas() {
	for _, m := range s.lambdas {
		m.stop()
		<-m.done
		if m.rie.ProcessState == nil {
			_ = m.rie.Process.Kill()
			_ = m.rie.Wait()
		}
	}
	s.lambdas = nil
}
