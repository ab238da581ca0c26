package chaos

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-dev/sluice/internal/bench/consumers"
	"github.com/sluice-dev/sluice/internal/bench/kafka"
	"github.com/sluice-dev/sluice/internal/defaults"
	"github.com/sluice-dev/sluice/internal/poll"
	"github.com/sluice-dev/sluice/pkg/adapter/httpsink"
	"github.com/sluice-dev/sluice/pkg/adapter/kafkasource"
	"github.com/sluice-dev/sluice/pkg/adapter/memstore"
	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink"
	"github.com/sluice-dev/sluice/pkg/consume"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// PathKafka is the Kafka worker's path: the worker's consumer
// (consume.Consumer over kafkasource.Source and httpsink.Sink) in this
// process, on the real broker.
const PathKafka = "kafka-worker"

// KafkaScenario is a fault on the Kafka path.
type KafkaScenario struct {
	Name     string
	Messages int
	// Stuck is the seq of a record the destination fails (503) on every
	// try; -1 for none.
	Stuck int
	// Collisions is how many extra records reuse the id of an earlier one
	// with another body.
	Collisions int
	// Partitions of the topic (default 4).
	Partitions int32
	// Rate is the allowed rate (default 1,000 msg/s): both runs of the
	// throughput comparison are paced alike.
	Rate float64
	// RetryBackoff is the source's per-record backoff (zero: the
	// source's default, 1 s doubling to 60 s).
	RetryBackoff consume.Backoff
	// Schedule is the HTTP destination's answers from the start.
	Schedule []Phase
	// Down stops a private MariaDB (the sink then) for this long once a
	// third of the records are stored; 0 keeps the HTTP destination.
	Down time.Duration
	// MySQL makes a private MariaDB the destination (the default messages
	// table and its inbox) without an outage.
	MySQL bool
	// FK plays fk-order on a private MariaDB: the sink's statement
	// fkStatement (a row's parent must be stored first) and bodies
	// childFirst, whose parents and children land on other partitions.
	FK bool
	// Silent makes the destination (HTTP, or the private MariaDB with
	// MySQL) fall silent, accepting connections and never answering, for
	// this long once a third of the healthy records are stored; 0: never.
	Silent time.Duration
	// FunctionTimeout is the kafka-lambda function's timeout (default
	// kafkaFunctionTimeout).
	FunctionTimeout time.Duration
	// FullOnly keeps the scenario out of the kafka-worker path's short
	// runs (Size.Scale below 1).
	FullOnly bool
	// Pause pauses the loop (pause.go) for this long once a third of the
	// records are stored; 0: no pause.
	Pause time.Duration
	// RefuseDLT makes the broker refuse every write to the dead-letter
	// topic from the start for this long (kafkadlq.go); 0: it takes them.
	RefuseDLT time.Duration
	// OnFailure gives the kafka-lambda mapping an on-failure destination:
	// AWS then retries a failed batch 10 times and discards it.
	OnFailure bool
	// MaxHeld is the worker's kafkasource.Config.MaxHeld (0: its default).
	MaxHeld int
	// Limit bounds the scenario (default 20 min).
	Limit time.Duration
	// Lambda, when set, plays the scenario on the kafka-lambda path instead
	// of the worker's consumer (see kafkalambda.go).
	Lambda *KafkaLambda
}

// kafkaRun is one run's state.
type kafkaRun struct {
	brokers []string
	topic   string
	dest    *Destination
	db      *MariaDB // the sink when the scenario stops MySQL
	// silent stands between the consumers and the destination when the
	// scenario silences it.
	silent *SilentProxy
	cl     *kgo.Client
	faults []string
	// loops holds the paused loop's PARAMS, STATE and RATE, and sw is the
	// stand-in mapping's Enabled (pause.go).
	loops *memstore.Store
	sw    *standIn
	// dlq is what the consumers count of a refusing dead-letter topic,
	// and extra what the faults measured (Result.Extra).
	dlq   dlqCounts
	extra map[string]any
	// deadlineHits counts the function's invocations that ran to its
	// deadline (kafka-lambda).
	deadlineHits atomic.Int64
}

// limit is the scenario's time limit: Limit, or 20 minutes.
func (sc KafkaScenario) limit() time.Duration { return defaults.Positive(sc.Limit, 20*time.Minute) }

// PlayKafka runs sc; with a stuck record it runs it a second time without
// one and reports the other records' throughput as a ratio of that run's.
func PlayKafka(ctx context.Context, root string, brokers []string, sc KafkaScenario) Result {
	sc.Limit = sc.limit()
	sc.Partitions = defaults.Positive(sc.Partitions, 4)
	sc.Rate = defaults.Positive(sc.Rate, 1000)
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, sc.Limit)
	defer cancel()
	r, took, err := playKafka(ctx, root, brokers, sc)
	if err == nil && sc.Stuck >= 0 {
		base := sc
		base.Stuck = -1
		var baseTook time.Duration
		if _, baseTook, err = playKafka(ctx, root, brokers, base); err == nil {
			r.Extra["throughput_ratio"] = baseTook.Seconds() / took.Seconds()
			r.Extra["seconds_with_stuck_record"], r.Extra["seconds_without"] = took.Seconds(), baseTook.Seconds()
		}
	}
	if err != nil {
		r.Error = err.Error()
	}
	r.Seconds = time.Since(start).Seconds()
	r.check()
	if ratio, ok := r.Extra["throughput_ratio"].(float64); ok && ratio < 0.9 {
		r.OK = false
	}
	return r
}

// playKafka produces, consumes until every healthy record is stored and
// every poison one dead-lettered, and returns how long the healthy records
// other than the stuck one took.
func playKafka(ctx context.Context, root string, brokers []string, sc KafkaScenario) (Result, time.Duration, error) {
	path := PathKafka
	if sc.Lambda != nil {
		path = PathKafkaLambda
	}
	r := Result{Name: sc.Name, Path: path, Sent: sc.Messages + sc.Collisions, Extra: map[string]any{"collisions_dead_lettered": 0}}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return r, 0, err
	}
	defer cl.Close()
	kr := &kafkaRun{brokers: brokers, topic: fmt.Sprintf("chaos-%s-%d", sc.Name, time.Now().UnixNano()%1e9), dest: NewDestination(nil), cl: cl,
		loops: memstore.New(), sw: &standIn{}, extra: map[string]any{}}
	if sc.Down > 0 || sc.MySQL || sc.FK {
		if kr.db, err = privateMariaDB(ctx, kr.topic); err != nil {
			return r, 0, err
		}
		defer kr.db.Close()
	}
	if sc.FK {
		if err := kr.db.Exec(ctx, fkSchema, fkMessages); err != nil {
			return r, 0, err
		}
	}
	r.Extra["sink"] = kr.sinkName()
	if _, err := kadm.NewClient(cl).CreateTopics(ctx, sc.Partitions, 1, nil, kr.topic, kr.topic+".dlt"); err != nil {
		return r, 0, fmt.Errorf("create topic %s: %w", kr.topic, err)
	}
	if sc.RefuseDLT > 0 {
		if err := kr.refuseDLT(ctx, true); err != nil {
			return r, 0, err
		}
	}
	if sc.Stuck >= 0 {
		kr.dest.FailKey(kr.id(sc.Stuck))
	}
	poison, err := kr.produce(ctx, sc)
	if err != nil {
		return r, 0, err
	}
	r.Poison = poison
	kr.dest.Restart(sc.Schedule)
	start := time.Now()
	took, err := kr.consume(ctx, sc, poison)
	r.Faults = kr.faults
	maps.Copy(r.Extra, kr.extra)
	if err != nil {
		return r, took, err
	}
	r.Extra["consumed_seconds"] = time.Since(start).Seconds()
	err = kr.tally(ctx, sc, &r)
	if sc.Lambda != nil {
		pauseResult(kr.sw, &r)
		r.LambdaDeadlineHits = int(kr.deadlineHits.Load())
	}
	return r, took, err
}

func (k *kafkaRun) sinkName() string {
	if k.db != nil {
		return "mysql"
	}
	return "http"
}

func (k *kafkaRun) id(seq int) string { return k.topic + "-" + strconv.Itoa(seq) }

// produce writes the records (2 % poison) and the collisions: records whose
// message-id repeats an earlier healthy one's with another body. It returns
// how many must be dead-lettered.
func (k *kafkaRun) produce(ctx context.Context, sc KafkaScenario) (int, error) {
	var recs []*kgo.Record
	poison := 0
	body := func(seq int, poison bool) string { return bodyFor(k.sinkName(), seq, poison) }
	if sc.FK {
		body = childFirst
	}
	for i := range sc.Messages {
		if IsPoison(i) {
			poison++
		}
		recs = append(recs, &kgo.Record{Topic: k.topic, Key: []byte(k.id(i)), Value: []byte(body(i, IsPoison(i))),
			Headers: []kgo.RecordHeader{{Key: "message-id", Value: []byte(k.id(i))}, {Key: "tenant", Value: []byte("acme")}}})
	}
	for c := range sc.Collisions {
		seq := sc.Messages + c
		victim := collisionVictim(c)
		// The same key: the same partition, after the victim.
		recs = append(recs, &kgo.Record{Topic: k.topic, Key: []byte(k.id(victim)), Value: []byte(Body(seq, false)),
			Headers: []kgo.RecordHeader{{Key: "message-id", Value: []byte(k.id(victim))}, {Key: "tenant", Value: []byte("acme")}}})
		poison++
	}
	if err := k.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return 0, fmt.Errorf("produce %d records: %w", len(recs), err)
	}
	return poison, nil
}

// collisionVictim is the healthy record whose id collision c reuses.
func collisionVictim(c int) int {
	v := c*7 + 1
	for IsPoison(v) {
		v++
	}
	return v
}

// consume runs the worker's consumer until the destination has every
// healthy record but the stuck one and the dead-letter topic every poison
// one (and the stuck one); it returns when the healthy ones were done.
func (k *kafkaRun) consume(ctx context.Context, sc KafkaScenario, poison int) (time.Duration, error) {
	srv := httptest.NewServer(k.dest)
	defer srv.Close()
	destURL := srv.URL
	if sc.Silent > 0 {
		target := srv.Listener.Addr().String()
		if k.db != nil {
			target = fmt.Sprintf("127.0.0.1:%d", k.db.Port)
		}
		p, err := StartSilentProxy(target)
		if err != nil {
			return 0, err
		}
		defer p.Close()
		k.silent = p
		if k.db == nil {
			destURL = "http://" + p.Addr()
		}
	}
	if sc.Lambda != nil {
		return k.consumeLambda(ctx, sc, poison, destURL)
	}
	now := time.Now()
	if err := k.loops.WriteRate(ctx, protocol.Rate{Loop: "chaos", PerSecond: sc.Rate, WrittenAt: now, ExpiresAt: now.Add(24 * time.Hour)}); err != nil {
		return 0, err
	}
	rc := consume.NewRateCache(consume.RateCacheConfig{Loop: "chaos", SafeRate: sc.Rate}, k.loops, nil, consume.WallClock{}, nil, nil)
	// As the worker on Kafka: one inline retry, the rest by the source.
	var sink consume.Sink = httpsink.New(httpsink.Config{Timeout: 2 * time.Second, Parallel: 16, Attempts: KafkaHTTPAttempts}, httpsink.NewRoundRobin(destURL), nil, consume.WallClock{})
	if k.db != nil {
		db, err := k.openDB()
		if err != nil {
			return 0, err
		}
		defer db.Close()
		if err := mysqlsink.Migrate(ctx, db); err != nil {
			return 0, fmt.Errorf("migrate: %w", err)
		}
		if sc.FK {
			if sink, err = mysqlsink.Prepare(ctx, db, mysqlsink.Config{Statement: fkStatement}); err != nil {
				return 0, err
			}
		} else {
			sink = mysqlsink.New(db)
		}
	}
	cons := consume.New(consume.Config{BatchSize: kafkaBatch}, rc, sink, consume.WallClock{}, nil, nil)
	src, err := kafkasource.New(kafkasource.Config{Brokers: k.brokers, Topics: []string{k.topic}, Group: k.topic + "-g", Pacer: cons.Pacer(),
		RetryBackoff: sc.RetryBackoff, MaxHeld: sc.MaxHeld})
	if err != nil {
		return 0, err
	}
	k.dlq = dlqCounts{held: src.Held, refused: src.Stats().DeadLetterRefused.Load}
	cctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); cons.Run(cctx, src) }()
	defer func() { stop(); wg.Wait(); src.Close(context.Background()) }()
	return k.await(ctx, sc, poison, func() int64 { return src.Stats().DeadLettered.Load() })
}

// await waits until the destination has every healthy record but the stuck
// one and deadLettered counts every poison one (and the stuck one); it
// returns how long the healthy ones took. It stops the private MariaDB on
// the way when the scenario asks for it.
func (k *kafkaRun) await(ctx context.Context, sc KafkaScenario, poison int, deadLettered func() int64) (time.Duration, error) {
	healthy := sc.Messages - (poison - sc.Collisions)
	if sc.Stuck >= 0 {
		healthy--
	}
	start := time.Now()
	if sc.Down > 0 {
		if err := k.outage(ctx, healthy/3, sc.Down); err != nil {
			return 0, err
		}
	}
	if sc.Pause > 0 {
		if err := k.pause(ctx, healthy/3, sc); err != nil {
			return 0, err
		}
	}
	if sc.Silent > 0 {
		if err := k.silence(ctx, healthy/3, sc.Silent); err != nil {
			return 0, err
		}
	}
	if sc.RefuseDLT > 0 {
		extra, err := k.dltRefused(ctx, sc, k.dlq)
		maps.Copy(k.extra, extra)
		if err != nil {
			return 0, err
		}
	}
	if err := until(ctx, func() bool { return len(k.stored(ctx)) >= healthy }); err != nil {
		return 0, fmt.Errorf("waiting for %d healthy records: %w", healthy, err)
	}
	took := time.Since(start)
	wantDead := int64(poison)
	if sc.Stuck >= 0 {
		wantDead++
	}
	if err := until(ctx, func() bool { return deadLettered() >= wantDead }); err != nil {
		return took, fmt.Errorf("waiting for %d dead letters: %w", wantDead, err)
	}
	return took, nil
}

// outage stops the MariaDB once rows are stored, for d, then starts it.
func (k *kafkaRun) outage(ctx context.Context, rows int, d time.Duration) error {
	if err := until(ctx, func() bool { return k.db.Rows(ctx) >= rows }); err != nil {
		return err
	}
	at := k.db.Rows(ctx)
	k.db.Stop()
	if err := sleep(ctx, d); err != nil {
		return err
	}
	k.faults = append(k.faults, fmt.Sprintf("MariaDB stopped at %d rows for %v", at, d))
	return k.db.Start(ctx)
}

// openDB opens the worker's pool on the private MariaDB: through the
// silent proxy with no read or write timeout when there is one (as a DSN
// from an RDS secret has none: what bounds a silent call is the
// consumer's), else directly.
func (k *kafkaRun) openDB() (*sql.DB, error) {
	if k.silent != nil {
		return mysqlsink.Open(k.silentDSN(), mysqlsink.WorkerConn())
	}
	return sql.Open("mysql", k.db.DSN())
}

// silentDSN is the private MariaDB's DSN through the silent proxy.
func (k *kafkaRun) silentDSN() string { return "chaos:chaos@tcp(" + k.silent.Addr() + ")/chaos" }

// silence makes the destination fall silent once rows are stored, for d
// (silenceAt).
func (k *kafkaRun) silence(ctx context.Context, rows int, d time.Duration) error {
	at, err := silenceAt(ctx, rows, d, func() int { return len(k.stored(ctx)) }, []*SilentProxy{k.silent}, k.silent)
	if at < 0 {
		return err
	}
	k.extra["connections_held"] = k.silent.Held()
	k.extra["requests_during_silence"] = k.silent.Requests()
	k.faults = append(k.faults, fmt.Sprintf("%s destination silent (accepted, never answered) at %d stored, for %v", k.sinkName(), at, d))
	return err
}

// stored returns the stored seqs (with their copies) of the sink in use.
func (k *kafkaRun) stored(ctx context.Context) map[int]int {
	if k.db == nil {
		return k.dest.Stored()
	}
	m, err := k.db.Stored(ctx)
	if err != nil {
		return nil
	}
	return m
}

// tally reads the dead-letter topic and the destination.
func (k *kafkaRun) tally(ctx context.Context, sc KafkaScenario, r *Result) error {
	dead, err := k.readDLT(ctx)
	if err != nil {
		return err
	}
	stored := k.stored(ctx)
	for seq := range sc.Messages + sc.Collisions {
		collision := seq >= sc.Messages
		bad := IsPoison(seq) || collision
		switch n := stored[seq]; {
		case bad || seq == sc.Stuck:
		case n == 0:
			r.Missing++
		default:
			r.Stored++
		}
		r.Duplicates += max(stored[seq]-1, 0)
		reason, ok := dead[seq]
		switch {
		case !ok:
		case bad:
			r.DeadLettered++
			if reason != "" {
				r.PoisonWithReason++
			}
		case seq == sc.Stuck && strings.Contains(reason, "retries exhausted"):
			r.Extra["stuck_dead_lettered"] = reason
		default:
			r.HealthyDeadLettered++
		}
		if collision && strings.Contains(reason, "id collision") {
			r.Extra["collisions_dead_lettered"] = r.Extra["collisions_dead_lettered"].(int) + 1
		}
	}
	if sc.Stuck >= 0 {
		r.Stored++ // the stuck record is accounted for by its dead letter
	}
	if got := r.Extra["collisions_dead_lettered"].(int); got != sc.Collisions {
		r.Error = fmt.Sprintf("%d of %d id collisions dead-lettered with the reason %q", got, sc.Collisions, "id collision")
	}
	if k.db == nil {
		r.MaxAttempts = k.dest.MaxAttempts()
		r.Answers = k.dest.Answers()
	}
	return nil
}

// readDLT returns the dead-lettered seqs with their reasons (the reason only
// when the original headers were kept too).
func (k *kafkaRun) readDLT(ctx context.Context) (map[int]string, error) {
	out := map[int]string{}
	err := kafka.ReadAll(ctx, k.brokers, k.topic+".dlt", func(rec *kgo.Record) {
		reason := kafka.Header(rec, kafkasource.HeaderReason)
		if kafka.Header(rec, "tenant") != "acme" {
			reason = ""
		}
		if seq, ok := consumers.Seq(rec.Value); ok {
			out[seq] = reason
		}
	})
	return out, err
}

// until polls cond every 100 ms until it holds or ctx ends.
func until(ctx context.Context, cond func() bool) error {
	return poll.Until(ctx, 100*time.Millisecond, func() (bool, error) { return cond(), nil })
}

// KafkaHTTPAttempts is the HTTP sink's attempts per Store on the Kafka
// worker (functions/worker uses the same): the source retries a failed
// record after its own backoff, so the sink retries only once inline and
// does not hold the rest of the batch.
const KafkaHTTPAttempts = 2

// kafkaBatch is the worker's consumer batch size on the Kafka path.
const kafkaBatch = 50

// KafkaScenarios returns the Kafka scenarios, sized by s.
func KafkaScenarios(s Size) []KafkaScenario {
	scenarios := []KafkaScenario{
		{Name: "mysql-down-90s", Messages: s.Worker, Stuck: -1, Down: max(s.d(90*time.Second), 15*time.Second)},
		{Name: "http-answers", Messages: s.Worker, Stuck: -1, Schedule: httpAnswers(s)},
		{Name: "rate-zero-30m", Messages: s.Worker, Stuck: -1, Pause: s.pauseFor(30 * time.Minute), Limit: 45 * time.Minute},
		{Name: "kafka-stuck-record", Messages: s.Worker, Stuck: 5},
		{Name: "id-collision", Messages: s.Worker, Stuck: -1, Collisions: 20},
		{Name: "id-collision", Messages: s.Worker, Stuck: -1, Collisions: 20, MySQL: true},
	}
	if s.Scale >= 1 { // its short version is mysql-down-90s's
		scenarios = append(scenarios, KafkaScenario{Name: "mysql-down-15m", Messages: s.Worker, Stuck: -1, Down: 15 * time.Minute, Limit: 45 * time.Minute})
	}
	for _, sc := range kafkaFaultScenarios(s) {
		if !sc.FullOnly || s.Scale >= 1 {
			scenarios = append(scenarios, sc)
		}
	}
	return scenarios
}
