package chaos

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// brownout is the brownout-90 schedule: 90 % of the requests answered 503
// or 429 (half each) for 10 minutes, the rest served.
func brownout(s Size) []Phase {
	return []Phase{{Status: http.StatusServiceUnavailable, Alt: http.StatusTooManyRequests, Share: 0.9, Lasts: max(s.d(10*time.Minute), 15*time.Second)}}
}

// massPoison is the mass-poison schedule: every request answered 400 for
// 2 minutes (at least 15 s, so that it meets the consumers however long
// they take to start), as a schema change or a proxy refusing everything
// does: the destination's fault, not the messages'. The breaker's
// mass-poison guard must hold the messages instead of dead-lettering the
// queue.
func massPoison(s Size) []Phase {
	return []Phase{{Status: http.StatusBadRequest, Lasts: max(s.d(2*time.Minute), 15*time.Second)}}
}

// refuseAll answers every request 400 once rows messages are stored (a
// healthy stretch first: the guard's window full of stored messages), for
// d, then serves again.
func refuseAll(rows int, d time.Duration) func(context.Context, *Run) ([]string, error) {
	return func(ctx context.Context, r *Run) ([]string, error) {
		for len(r.Dest.Stored()) < rows {
			if err := sleep(ctx, 100*time.Millisecond); err != nil {
				return nil, err
			}
		}
		at := len(r.Dest.Stored())
		r.Dest.Restart([]Phase{{Status: http.StatusBadRequest, Lasts: d}})
		return []string{fmt.Sprintf("every request answered 400 at %d stored, for %v", at, d)}, sleep(ctx, d)
	}
}

// faultScenarios are the SQS scenarios of the faults AWS users meet past
// a plain outage: a brownout, a destination refusing everything, a
// dead-letter queue refusing.
func faultScenarios(s Size) []Scenario {
	var out []Scenario
	for _, p := range []struct {
		path string
		n    int
	}{{PathLambda, s.Lambda}, {PathSQSWorker, s.Worker}} {
		out = append(out,
			// 75 minutes: what the Lambda hands back late in a 10-minute
			// brownout stays away by the outage's age, up to the long
			// backoff of its receive count (32 min at the fourth).
			Scenario{Name: "brownout-90", Path: p.path, Messages: p.n, Rate: 100, Schedule: brownout(s), Limit: 75 * time.Minute},
			Scenario{Name: "mass-poison", Path: p.path, Messages: p.n, Rate: 100, Fault: refuseAll(p.n/3, max(s.d(2*time.Minute), 10*time.Second))},
			// A function timeout shorter than the silence: a call that
			// waits for a silent connection runs the Lambda to its deadline.
			Scenario{Name: "silent-connection", Path: p.path, Messages: p.n, Rate: 100, Silent: true, FunctionTimeout: 10 * time.Second,
				Fault: silence(p.n/3, max(s.d(2*time.Minute), 15*time.Second))})
	}
	// The same silence with MySQL as the destination: the Lambda path in
	// go test (where a wait runs the function to its deadline), both in
	// make chaos.
	mysqlPaths := []string{PathLambda}
	if s.Scale >= 1 {
		mysqlPaths = append(mysqlPaths, PathSQSWorker)
	}
	for _, path := range mysqlPaths {
		n := map[string]int{PathLambda: s.Lambda, PathSQSWorker: s.Worker}[path]
		out = append(out, Scenario{Name: "silent-connection-mysql", Path: path, Messages: n, Rate: 100, Sink: "mysql", Silent: true,
			FunctionTimeout: 10 * time.Second,
			Fault:           silence(n/3, max(s.d(2*time.Minute), 15*time.Second))})
	}
	for _, p := range []struct {
		path string
		n    int
	}{{PathLambda, s.Lambda}, {PathSQSWorker, s.Worker}} {
		out = append(out, Scenario{Name: "fk-order", Path: p.path, Messages: p.n, Rate: 100, Sink: "mysql", Body: childFirst,
			Schema: []string{fkSchema, fkMessages}, Statement: fkStatement})
	}
	for _, p := range []struct {
		path string
		n    int
	}{{PathLambda, s.Lambda}, {PathSQSWorker, s.Worker}} {
		out = append(out, Scenario{Name: "dlq-refuses", Path: p.path, Messages: p.n, Rate: 100,
			Proxy: true, Fault: refuseDLQ(max(s.d(2*time.Minute), 15*time.Second))})
	}
	return out
}

// fkSchema and fkStatement are the fk-order scenario's tables: a row's
// parent must be stored first (foreign key), and every message is also
// kept in messages (id, body), which the tally reads.
const (
	fkSchema    = "CREATE TABLE fk_rows (seq INT PRIMARY KEY, parent INT NULL, FOREIGN KEY (parent) REFERENCES fk_rows (seq)) ENGINE=InnoDB"
	fkStatement = "INSERT INTO fk_rows (seq, parent) VALUES (:json.seq, :json.parent); INSERT INTO messages (id, body) VALUES (:id, :body)"
	fkMessages  = "CREATE TABLE messages (id VARCHAR(255) PRIMARY KEY, body JSON NOT NULL)"
)

// kafkaFaultScenarios are the same faults on Kafka (the worker's and the
// Lambda's paths): brownout-90, mass-poison, dlq-refuses, the silent
// destination (HTTP or MySQL; the Kafka paths here read no RATE from
// DynamoDB) and fk-order.
func kafkaFaultScenarios(s Size) []KafkaScenario {
	silent := max(s.d(2*time.Minute), 15*time.Second)
	return []KafkaScenario{
		// A function timeout shorter than the silence, as on SQS.
		{Name: "silent-connection", Messages: s.Worker, Stuck: -1, Silent: silent, FunctionTimeout: 10 * time.Second},
		{Name: "fk-order", Messages: s.Worker, Stuck: -1, FK: true},
		// MySQL silent at full size only, as on the SQS worker: the
		// worker's store waits its StoreTimeout (30 s) on a silent
		// connection, longer than the short silence (15 s).
		{Name: "silent-connection-mysql", Messages: s.Worker, Stuck: -1, MySQL: true, Silent: silent, FunctionTimeout: 10 * time.Second, FullOnly: true},
		{Name: "brownout-90", Messages: s.Worker, Stuck: -1, Schedule: brownout(s)},
		{Name: "mass-poison", Messages: s.Worker, Stuck: -1, Schedule: massPoison(s)},
		{Name: "dlq-refuses", Messages: s.Worker, Stuck: -1, RefuseDLT: max(s.d(2*time.Minute), 15*time.Second), MaxHeld: kafkaHeldBound,
			OnFailure: true},
	}
}

// heldBound is the most messages a worker may hold at once: one batch
// (the worker's default batch size). A refusing DLQ must not raise it.
const heldBound = 10

// refuseDLQ makes the SQS endpoint refuse every send to the dead-letter
// queue for d (KMS access denied, as for a key policy that lost the
// consumer's role), then accept them again. Meanwhile it samples the
// worker's held messages: more than heldBound fails the scenario, and so
// does a refusal the consumers did not count for an alarm (the worker's
// sluice_consumer_dead_letter_refused_total, the Lambda's EMF
// DeadLetterRefused; the Lambda holds nothing past its invocation).
func refuseDLQ(d time.Duration) func(context.Context, *Run) ([]string, error) {
	return func(ctx context.Context, r *Run) ([]string, error) {
		r.SQSProxy.Refuse(r.Stack.DLQURL, true)
		heldMax, refused := 0.0, 0.0
		for end := time.Now().Add(d); time.Now().Before(end); {
			if r.Worker == nil {
				refused = float64(r.emf.refused())
			} else if text, err := r.Worker.Scrape(ctx); err == nil {
				heldMax = max(heldMax, metricValue(text, "sluice_consumer_held"))
				refused = metricValue(text, "sluice_consumer_dead_letter_refused_total")
			}
			if err := sleep(ctx, 500*time.Millisecond); err != nil {
				return nil, err
			}
		}
		r.SQSProxy.Refuse(r.Stack.DLQURL, false)
		r.Extra["held_max"], r.Extra["dlq_refusals"], r.Extra["dlq_refused_metric"] = heldMax, r.SQSProxy.Refusals(), refused
		faults := []string{fmt.Sprintf("sends to the DLQ refused (KMS access denied) for %v", d)}
		switch {
		case heldMax > heldBound:
			return faults, fmt.Errorf("the worker held %v messages while the DLQ refused; want at most %d", heldMax, heldBound)
		case r.SQSProxy.Refusals() > 0 && refused == 0:
			return faults, fmt.Errorf("the DLQ refused %d sends and the consumers counted none (metric or EMF); want them counted", r.SQSProxy.Refusals())
		}
		return faults, nil
	}
}

// metricValue returns the value of the first sample of name in a
// Prometheus text exposition (0 when absent).
func metricValue(text, name string) float64 {
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		f := strings.Fields(line)
		v, _ := strconv.ParseFloat(f[len(f)-1], 64)
		return v
	}
	return 0
}

// silence makes the destination (HTTP or MySQL), DynamoDB and SQS fall
// silent once rows messages are stored, for d (silenceAt).
func silence(rows int, d time.Duration) func(context.Context, *Run) ([]string, error) {
	return func(ctx context.Context, r *Run) ([]string, error) {
		dest, stored := "http", func() int { return len(r.Dest.Stored()) }
		if r.DB != nil {
			dest, stored = "mysql", func() int { return r.DB.Rows(ctx) }
		}
		at, err := silenceAt(ctx, rows, d, stored, slices.Collect(maps.Values(r.Silent)), r.Silent[dest])
		if at < 0 {
			return nil, err
		}
		for name, p := range r.Silent {
			r.Extra["connections_held_"+name] = p.Held()
			r.Extra["requests_during_silence_"+name] = p.Requests()
		}
		return []string{fmt.Sprintf("%s destination, DynamoDB and SQS silent (accepted, never answered) at %d stored, for %v", dest, at, d)}, err
	}
}

// silenceAt waits until stored() reaches rows, makes every one of
// proxies fall silent (connections accepted, never answered) for d, then
// lets them answer again. It returns how many were stored when the
// silence began, or -1 with ctx's error when ctx ended before. A consumer
// that times out retries, on a new connection or on an idle one of its
// pool: no request to dest (one of proxies) begun during the silence means
// it waited on a silent connection throughout, and is an error.
func silenceAt(ctx context.Context, rows int, d time.Duration, stored func() int, proxies []*SilentProxy, dest *SilentProxy) (int, error) {
	if err := until(ctx, func() bool { return stored() >= rows }); err != nil {
		return -1, err
	}
	at := stored()
	for _, p := range proxies {
		p.SetSilent(true)
	}
	err := sleep(ctx, d)
	for _, p := range proxies {
		p.SetSilent(false)
	}
	if err == nil && dest.Requests() == 0 {
		err = fmt.Errorf("no request to the destination begun during %v of silence: the consumer waited instead of timing out and retrying", d)
	}
	return at, err
}
