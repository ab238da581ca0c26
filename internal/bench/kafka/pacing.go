package kafka

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/internal/bench/consumers"
	"github.com/sluice-dev/sluice/internal/defaults"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// PacingPoint is one pacing measurement of the kafka-lambda path: the
// rate at which the functions stored records over the measured windows,
// against the allowed rate.
type PacingPoint struct {
	Path       string  `json:"path"`
	Partitions int     `json:"partitions"`
	Allowed    float64 `json:"allowed"`
	Achieved   float64 `json:"achieved"`
	ErrorPct   float64 `json:"error_pct"`
}

// Pacing configures PaceLambda.
type Pacing struct {
	// Config gives the brokers, the database, the Lambda (required), the
	// allowed rate (Rate, the functions' safe rate: no RATE item exists
	// for the run's loop, so every invocation paces at it) and Partitions
	// (one mapping member, hence one concurrent invocation, per partition).
	Config
	// Window is the measuring window; the first is warm-up, then Windows
	// windows are measured.
	Window  time.Duration
	Windows int
}

// PaceLambda measures the kafka-lambda path's pacing: a topic of
// Partitions partitions holding more records than the run can store,
// drained by one emulated mapping member per partition (the real
// kafka-consumer bootstrap under the emulator), into MariaDB; the stored
// rate is counted in the table.
func PaceLambda(ctx context.Context, p Pacing) (PacingPoint, error) {
	p.Config.PoisonEvery = -1
	p.Windows = defaults.Positive(p.Windows, 1)
	p.Config.Messages = int(p.Rate*p.Window.Seconds()*float64(p.Windows+1)*1.3) + 200
	cfg := p.Config.withDefaults()
	pt := PacingPoint{Path: LambdaPath, Partitions: int(cfg.Partitions), Allowed: cfg.Rate}
	if cfg.Lambda == nil || len(cfg.Brokers) == 0 || cfg.DSN == "" {
		return pt, errors.New("kafka-lambda pacing: brokers, DSN and a Lambda are required")
	}
	s := &scenario{cfg: cfg, run: fmt.Sprintf("%d", time.Now().UnixNano()), path: LambdaPath, pacing: true}
	s.topic = "sluice-pace-" + s.run
	defer s.stopLambdas()
	dropDB, err := s.openDatabase(ctx)
	if err != nil {
		return pt, err
	}
	defer dropDB()
	if s.cl, err = kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...), kgo.DefaultProduceTopic(s.topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerLinger(5*time.Millisecond)); err != nil {
		return pt, fmt.Errorf("kafka client: %w", err)
	}
	defer s.cl.Close()
	s.adm = kadm.NewClient(s.cl)
	defer s.adm.DeleteTopics(context.Background(), s.topic, s.topic+".dlt")
	if _, err := s.produce(ctx); err != nil {
		return pt, err
	}
	for i := range int(cfg.Partitions) {
		if err := s.startLambda(fmt.Sprintf("p%d", i)); err != nil {
			return pt, err
		}
	}
	return s.measure(ctx, p, pt)
}

// measure counts the rows stored over the windows after the first.
func (s *scenario) measure(ctx context.Context, p Pacing, pt PacingPoint) (PacingPoint, error) {
	achieved, to, err := consumers.MeasureRate(ctx, p.Window, p.Windows, func() int64 { return int64(s.stored(ctx)) })
	if err != nil {
		return pt, err
	}
	if to >= int64(s.cfg.Messages) {
		return pt, fmt.Errorf("the topic ran dry (%d of %d stored): the measurement is not paced", to, s.cfg.Messages)
	}
	pt.Achieved = achieved
	pt.ErrorPct = 100 * (pt.Achieved - pt.Allowed) / pt.Allowed
	return pt, nil
}
