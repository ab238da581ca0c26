package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluice-dev/sluice/pkg/adapter/awsconf"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbstore"
)

// stacksReport is what -stacks reports: one controller stack and two
// consumer stacks (one on a queue that existed before), each consumer's
// loop as its leases name it, and a second controller deployment after
// the first was deleted.
type stacksReport struct {
	Stacks []*stackReport `json:"stacks"`
	// LoopsTicked are the loops one tick of the controller stack applied.
	LoopsTicked []string `json:"loops_ticked"`
	// RedeployedAfterDelete: the controller stack, deleted, deployed again
	// under the same name (its retained table does not collide).
	RedeployedAfterDelete bool `json:"redeployed_after_delete"`
}

// stackReport is one deployed stack.
type stackReport struct {
	Name   string `json:"name"`
	Kind   string `json:"kind"` // controller or consumer
	Status string `json:"status"`
	// Loop is a consumer stack's LoopId; LeaseLoops the loops of the
	// leases its consumer wrote (want exactly Loop).
	Loop       string   `json:"loop,omitempty"`
	LeaseLoops []string `json:"lease_loops,omitempty"`
	// ExistingQueue: the stack attached to a queue it did not create.
	ExistingQueue bool `json:"existing_queue,omitempty"`
	RowsStored    int  `json:"rows_stored"`
	Deleted       bool `json:"deleted"`
}

// stackSet is the run's three deployments and what they share.
type stackSet struct {
	base, ctl *deployment
	consumers []*deployment
	reports   map[string]*stackReport
	tables    []string
	existing  string // the URL of the queue that existed before
}

// deployStacks is -stacks: build stacks/controller.yaml and
// stacks/consumer.yaml, deploy the controller, then a consumer stack on a
// queue it creates and one on a queue that exists, run them (a tick of
// both loops, a batch through each mapping), delete them, and deploy and
// delete the controller once more.
func (r *runner) deployStacks() {
	base, err := newDeployment(r.o.buildDir)
	if err != nil {
		r.Fail("stacks: %v", err)
		return
	}
	s := &stackSet{base: base, reports: map[string]*stackReport{}}
	if r.res.deployed == nil { // -stacks alone: the fields the shared steps set
		r.res.deployed = &deployed{TypesLeftOut: map[string]string{}, ResourcesLeftOut: []string{}}
	}
	r.res.stacksReport = &stacksReport{Stacks: []*stackReport{}, LoopsTicked: []string{}}
	defer r.cleanUpStacks(s)
	if err := r.prepare(base); err != nil {
		r.Fail("stacks: prepare: %v", err)
		return
	}
	if err := r.buildStacks(s); err != nil {
		r.Fail("stacks: %v", err)
		return
	}
	if err := r.deployControllerStack(s); err != nil {
		r.Fail("stacks: controller: %v", err)
		return
	}
	if err := r.deployConsumerStacks(s); err != nil {
		r.Fail("stacks: consumers: %v", err)
	} else {
		r.runStacks(s)
	}
	r.deleteStacks(s)
	r.redeployController(s)
}

// buildStacks writes each stack's built template: its functions are
// template.yaml's (the same logical ids, the same code), so it points their
// CodeUri at what sam build built for template.yaml, as sam build would.
func (r *runner) buildStacks(s *stackSet) error {
	root := filepath.Dir(r.o.buildDir)
	s.ctl = &deployment{stack: s.base.stack + "-ctl", bucket: s.base.bucket, endpoint: s.base.endpoint, dsn: s.base.dsn,
		buildDir: filepath.Join(root, "stacks-controller")}
	cons := filepath.Join(root, "stacks-consumer")
	for _, b := range []struct{ template, dir string }{{"stacks/controller.yaml", s.ctl.buildDir}, {"stacks/consumer.yaml", cons}} {
		if err := r.builtTemplate(b.template, b.dir); err != nil {
			return err
		}
	}
	for _, name := range []string{"a", "b"} {
		id := s.base.stack + "-" + name
		s.consumers = append(s.consumers, &deployment{stack: id, bucket: s.base.bucket, queue: id + "-queue", loop: id, db: id + "-db",
			secret: s.base.secret, endpoint: s.base.endpoint, dsn: s.base.dsn, buildDir: cons})
	}
	return nil
}

// report returns the report of d's stack, adding it on first use.
func (r *runner) report(s *stackSet, d *deployment, kind string) *stackReport {
	if rep, ok := s.reports[d.stack]; ok {
		return rep
	}
	rep := &stackReport{Name: d.stack, Kind: kind, Loop: d.loop}
	r.res.Stacks = append(r.res.Stacks, rep)
	s.reports[d.stack] = rep
	return rep
}

// deployControllerStack deploys the controller stack and reads its table's
// name from its outputs.
func (r *runner) deployControllerStack(s *stackSet) error {
	rep := r.report(s, s.ctl, "controller")
	if err := r.deploy(s.ctl); err != nil {
		return err
	}
	table, err := r.tableOf(s.ctl)
	if err != nil {
		return err
	}
	s.ctl.table = table
	s.tables = append(s.tables, table)
	rep.Status, err = r.stackStatus(s.ctl)
	return err
}

// deployConsumerStacks creates the queue that exists before, then deploys
// consumer a (its own queue) and consumer b (that queue) on the
// controller's table.
func (r *runner) deployConsumerStacks(s *stackSet) error {
	c, err := r.sqsClient()
	if err != nil {
		return err
	}
	b := s.consumers[1]
	b.queue = s.base.stack + "-existing"
	q, err := c.CreateQueue(r.Ctx, &sqs.CreateQueueInput{QueueName: aws.String(b.queue)})
	if err != nil {
		return fmt.Errorf("create the existing queue: %w", err)
	}
	s.existing = aws.ToString(q.QueueUrl)
	attrs, err := c.GetQueueAttributes(r.Ctx, &sqs.GetQueueAttributesInput{QueueUrl: q.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		return err
	}
	for i, d := range s.consumers {
		d.table = s.ctl.table
		d.params = []string{"LoopId=" + d.loop, "TableName=" + d.table, "ConsumerSink=mysql", "ConsumerMySQLSecretName=" + d.secret, "ConsumerMaxConcurrency=2"}
		if i == 0 {
			d.params = append(d.params, "QueueName="+d.queue)
		} else {
			d.params = append(d.params, "ExistingQueueArn="+attrs.Attributes[string(sqstypes.QueueAttributeNameQueueArn)])
		}
		rep := r.report(s, d, "consumer")
		rep.ExistingQueue = i == 1
		if err := r.deploy(d); err != nil {
			return err
		}
		if rep.Status, err = r.stackStatus(d); err != nil {
			return err
		}
	}
	return nil
}

// runStacks ticks the controller stack once with both loops in its table
// and sends a batch through each consumer stack's mapping; each consumer's
// lease must name its stack's loop.
func (r *runner) runStacks(s *stackSet) {
	all := map[string]*function{}
	stop := func() {
		for _, f := range all {
			f.rie.Stop()
		}
	}
	defer stop()
	infos := map[string]stackInfo{}
	for _, d := range append([]*deployment{s.ctl}, s.consumers...) {
		st, err := r.resources(d)
		if err == nil {
			var fns map[string]*function
			fns, err = r.startFunctions(d, st)
			for k, f := range fns {
				all[d.stack+"/"+k] = f
			}
		}
		if err != nil {
			r.Fail("stacks: start %s: %v", d.stack, err)
			return
		}
		infos[d.stack] = st
	}
	r.tickStacks(s, infos[s.ctl.stack], all)
	for _, d := range s.consumers {
		n, err := r.batch(d, all)
		r.report(s, d, "consumer").RowsStored = n
		if err != nil {
			r.Fail("stacks: batch through %s: %v", d.stack, err)
		}
	}
	r.checkLeases(s)
}

// tickStacks gives the table both consumer loops and invokes the
// controller stack's schedule target once: both must tick.
func (r *runner) tickStacks(s *stackSet, st stackInfo, fns map[string]*function) {
	a, b := s.consumers[0], s.consumers[1]
	if err := r.seedLoop(b); err != nil {
		r.Fail("stacks: seed %s: %v", b.loop, err)
		return
	}
	// tick seeds a's loop and checks it; b's RATE is then read back.
	probe := *s.ctl
	probe.loop, probe.db = a.loop, a.db
	if err := r.tick(&probe, st, fns); err != nil {
		r.Fail("stacks: tick: %v", err)
		return
	}
	r.res.LoopsTicked = append(r.res.LoopsTicked, a.loop)
	cfg, err := awsconf.Load(r.Ctx)
	if err != nil {
		r.Fail("stacks: %v", err)
		return
	}
	if _, err := ddbstore.New(dynamodb.NewFromConfig(cfg), s.ctl.table).ReadRate(r.Ctx, b.loop); err != nil {
		r.Fail("stacks: loop %s did not tick: %v", b.loop, err)
		return
	}
	r.res.LoopsTicked = append(r.res.LoopsTicked, b.loop)
}

// checkLeases reads the leases of the table in both layouts (version 1:
// every loop's, on the by-sk index; version 2: each consumer loop's own
// partition, which a consumer writes once the controller's RATE names
// layout 2): each consumer stack's consumer wrote its own loop's, and no
// lease names another loop.
func (r *runner) checkLeases(s *stackSet) {
	cfg, err := awsconf.Load(r.Ctx)
	if err != nil {
		r.Fail("stacks: %v", err)
		return
	}
	store := ddbstore.New(dynamodb.NewFromConfig(cfg), s.ctl.table)
	peers, err := store.Peers(r.Ctx)
	if err != nil {
		r.Fail("stacks: leases: %v", err)
		return
	}
	known := map[string]bool{}
	for _, d := range s.consumers {
		known[d.loop] = true
		rep := r.report(s, d, "consumer")
		v2, err := store.LoopPeers(r.Ctx, d.loop)
		if err != nil {
			r.Fail("stacks: leases of %s: %v", d.loop, err)
			continue
		}
		if len(peers[d.loop])+len(v2) > 0 {
			rep.LeaseLoops = append(rep.LeaseLoops, d.loop)
		} else {
			r.Fail("stacks: no lease of loop %s from stack %s", d.loop, d.stack)
		}
	}
	for loop := range peers {
		if !known[loop] {
			r.Fail("stacks: a lease of loop %s, which no consumer stack names", loop)
		}
	}
}

// deleteStacks deletes the consumer stacks, then the controller stack.
func (r *runner) deleteStacks(s *stackSet) {
	for _, d := range append(append([]*deployment{}, s.consumers...), s.ctl) {
		rep, ok := s.reports[d.stack]
		if !ok {
			continue
		}
		if err := r.deleteStack(d); err != nil {
			r.Fail("stacks: delete %s: %v", d.stack, err)
			continue
		}
		rep.Deleted = true
	}
}

// redeployController deploys the controller stack again under its name
// after its deletion (a new table: the retained one does not collide),
// then deletes it.
func (r *runner) redeployController(s *stackSet) {
	if rep, ok := s.reports[s.ctl.stack]; !ok || !rep.Deleted {
		return
	}
	if err := r.deploy(s.ctl); err != nil {
		r.Fail("stacks: deploy %s again after its delete: %v", s.ctl.stack, err)
		return
	}
	if table, err := r.tableOf(s.ctl); err == nil {
		s.tables = append(s.tables, table)
	}
	if st, err := r.stackStatus(s.ctl); err != nil || st != "CREATE_COMPLETE" {
		r.Fail("stacks: %s deployed again: %s (%v)", s.ctl.stack, st, err)
		return
	}
	if err := r.deleteStack(s.ctl); err != nil {
		r.Fail("stacks: delete %s again: %v", s.ctl.stack, err)
		return
	}
	r.res.RedeployedAfterDelete = true
}

// stackDescription is the part of describe-stacks used here.
type stackDescription struct {
	Stacks []struct {
		StackStatus string `json:"StackStatus"`
	} `json:"Stacks"`
}

func (r *runner) describe(d *deployment) (stackDescription, error) {
	var out stackDescription
	if err := r.aws(d, &out, "cloudformation", "describe-stacks", "--stack-name", d.stack); err != nil {
		return out, err
	}
	if len(out.Stacks) != 1 {
		return out, fmt.Errorf("describe-stacks %s: %d stacks", d.stack, len(out.Stacks))
	}
	return out, nil
}

// stackStatus returns d's status, an error unless CREATE_COMPLETE.
func (r *runner) stackStatus(d *deployment) (string, error) {
	out, err := r.describe(d)
	if err != nil {
		return "", err
	}
	st := out.Stacks[0].StackStatus
	if st != "CREATE_COMPLETE" {
		return st, fmt.Errorf("stack %s is %s", d.stack, st)
	}
	return st, nil
}

// tableOf returns the name CloudFormation gave the table of d's stack:
// the output TableName (!Ref Table), read from the resource itself since
// moto's describe-stacks returns no outputs.
func (r *runner) tableOf(d *deployment) (string, error) {
	st, err := r.resources(d)
	if err != nil {
		return "", err
	}
	for _, res := range st.ofType("AWS::DynamoDB::Table") {
		if res.Logical == "Table" {
			return res.Physical, nil
		}
	}
	return "", fmt.Errorf("stack %s has no table", d.stack)
}

// resources lists d's stack's resources.
func (r *runner) resources(d *deployment) (stackInfo, error) {
	var list struct {
		Summaries []resource `json:"StackResourceSummaries"`
	}
	if err := r.aws(d, &list, "cloudformation", "list-stack-resources", "--stack-name", d.stack); err != nil {
		return stackInfo{}, err
	}
	return stackInfo{list.Summaries}, nil
}

// cleanUpStacks removes what the stacks retain or never owned: the
// tables, the queue that existed before, the secret, the bucket.
func (r *runner) cleanUpStacks(s *stackSet) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Ctx), defaultStepTimeout)
	defer cancel()
	cfg, err := awsconf.Load(ctx)
	if err != nil {
		return
	}
	for _, t := range s.tables {
		dynamodb.NewFromConfig(cfg).DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(t)})
	}
	if s.existing != "" {
		if c, err := r.sqsClient(); err == nil {
			c.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(s.existing)})
		}
	}
	r.cleanUp(s.base)
}

// functionRE finds a function's logical id and its CodeUri line.
var functionRE = regexp.MustCompile(`(?m)^  ([A-Za-z0-9]+):\n    Type: AWS::Serverless::Function\n(?:    .*\n|      .*\n|\s*\n)*?      CodeUri: \.\n`)

// builtTemplate writes template into dir as sam build would have built it:
// each function's CodeUri is its directory under the -build-dir of
// template.yaml, whose bootstraps are the same functions'.
func (r *runner) builtTemplate(template, dir string) error {
	b, err := os.ReadFile(template)
	if err != nil {
		return err
	}
	abs, err := filepath.Abs(r.o.buildDir)
	if err != nil {
		return err
	}
	n := 0
	out := functionRE.ReplaceAllStringFunc(string(b), func(m string) string {
		id := functionRE.FindStringSubmatch(m)[1]
		n++
		return strings.TrimSuffix(m, "CodeUri: .\n") + "CodeUri: " + filepath.Join(abs, id) + "\n"
	})
	if n == 0 {
		return fmt.Errorf("%s: no function with CodeUri .", template)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, m := range functionRE.FindAllStringSubmatch(string(b), -1) {
		if _, err := os.Stat(filepath.Join(abs, m[1], "bootstrap")); err != nil {
			return fmt.Errorf("%s's %s: not built for template.yaml: %w", template, m[1], err)
		}
	}
	r.Logf("%s: %d functions from %s", template, n, r.o.buildDir)
	return os.WriteFile(filepath.Join(dir, "template.yaml"), []byte(out), 0o644)
}
