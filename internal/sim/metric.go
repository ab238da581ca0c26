package sim

import (
	"math/rand/v2"
	"time"
)

// Datapoint is one published metric value: the average CPU over
// [Start, Start+Period), as CloudWatch publishes it.
type Datapoint struct {
	Start     time.Duration `json:"start"`
	Period    time.Duration `json:"period"`
	Value     float64       `json:"value"`
	Published time.Duration `json:"published"`
}

// End is the end of the datapoint's averaging period.
func (d Datapoint) End() time.Duration { return d.Start + d.Period }

// Pipeline is a CloudWatch-like metric pipeline: it averages the CPU over
// each period, adds measurement noise, and publishes the datapoint Delay
// after its period ends.
type Pipeline struct {
	period, delay time.Duration
	noise         float64
	rng           *rand.Rand

	start   time.Duration // start of the open period
	sum     float64
	weight  time.Duration
	pending []Datapoint // not yet published, oldest first
	latest  Datapoint
	have    bool
}

// NewPipeline returns a pipeline whose history before time 0 shows the
// steady CPU y0 (the plant ran before the experiment started).
func NewPipeline(period, delay time.Duration, noise float64, rng *rand.Rand, y0 float64) *Pipeline {
	p := &Pipeline{period: period, delay: delay, noise: noise, rng: rng}
	// Datapoints of the periods before 0, as far back as the delay needs.
	n := int(delay/period) + 2
	for k := n; k >= 1; k-- {
		start := -time.Duration(k) * period
		p.pending = append(p.pending, Datapoint{Start: start, Period: period, Value: p.noisy(y0), Published: start + period + delay})
	}
	p.Publish(0)
	return p
}

func (p *Pipeline) noisy(v float64) float64 {
	if p.noise > 0 {
		v += p.noise * p.rng.NormFloat64()
	}
	return v
}

// Observe records CPU y over [t, t+dt) (dt must divide the period).
func (p *Pipeline) Observe(t, dt time.Duration, y float64) {
	p.sum += y * dt.Seconds()
	p.weight += dt
	if t+dt >= p.start+p.period {
		v := p.noisy(p.sum / p.weight.Seconds())
		p.pending = append(p.pending, Datapoint{Start: p.start, Period: p.period, Value: v, Published: p.start + p.period + p.delay})
		p.start += p.period
		p.sum, p.weight = 0, 0
	}
}

// Publish makes every datapoint due by now visible.
func (p *Pipeline) Publish(now time.Duration) {
	i := 0
	for ; i < len(p.pending) && p.pending[i].Published <= now; i++ {
		p.latest, p.have = p.pending[i], true
	}
	p.pending = p.pending[i:]
}

// Latest returns the newest published datapoint.
func (p *Pipeline) Latest() (Datapoint, bool) { return p.latest, p.have }
