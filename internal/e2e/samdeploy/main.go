// Command samdeploy is `make sam` and `make deploy-local`: it runs the real
// SAM CLI (pinned, in its own virtual environment) on template.yaml
// (`sam validate --lint`, `sam build`) and checks that every built bootstrap
// is a static aarch64 ELF. With -deploy it then deploys the built template
// to the local endpoint (moto_server's CloudFormation, the transform
// expanded locally by localstack/sam/expand.py), runs what it deployed (each
// function's bootstrap under the Lambda Runtime Interface Emulator with the
// environment read back from the endpoint; one tick through the deployed
// schedule's target, one batch through the deployed event source mapping's
// queue into MariaDB), and removes it with `sam delete`. It prints one JSON
// object as its last line and exits 1 when a step failed.
package main

import (
	"flag"
	"os"
	"time"

	"github.com/sluice-dev/sluice/internal/e2e/e2ekit"
	"github.com/sluice-dev/sluice/internal/e2e/verdict"
)

// result is the last line: the SAM checks, the deployment's fields (with
// -deploy only) and the verdict.
type result struct {
	SamVersion      string           `json:"sam_version"`
	ValidateOK      bool             `json:"validate_ok"`
	BuildOK         bool             `json:"build_ok"`
	Bootstraps      map[string]int64 `json:"bootstraps"`
	BootstrapsARM64 bool             `json:"bootstraps_arm64"`
	*deployed
	*stacksReport
	verdict.Verdict
}

// deployed is what -deploy reports.
type deployed struct {
	Stack            string            `json:"stack"`
	StackStatus      string            `json:"stack_status"`
	ResourcesCreated int               `json:"resources_created"`
	TypesLeftOut     map[string]string `json:"types_left_out"`
	ResourcesLeftOut []string          `json:"resources_left_out"`
	// WorkerServiceCreated: the optional ECS worker's service was created
	// (it is not run: the endpoint runs no container).
	WorkerServiceCreated bool   `json:"worker_service_created"`
	RanUnder             string `json:"ran_under"`
	TickOK               bool   `json:"tick_ok"`
	BatchOK              bool   `json:"batch_ok"`
	RowsStored           int    `json:"rows_stored"`
	Deleted              bool   `json:"deleted"`
}

// options are the command's flags.
type options struct {
	sam, template, buildDir, expand string
	deploy, stacks                  bool
	rie, emulator, logDir           string
}

func main() {
	var o options
	flag.StringVar(&o.sam, "sam", ".cache/sam/bin/sam", "the SAM CLI (make sam-cli installs it)")
	flag.StringVar(&o.template, "template", "template.yaml", "the SAM template")
	flag.StringVar(&o.buildDir, "build-dir", ".aws-sam/build", "where sam build writes")
	flag.StringVar(&o.expand, "expand", "localstack/sam/expand.py", "the script that expands the transform locally")
	flag.BoolVar(&o.deploy, "deploy", false, "deploy to the local endpoint, run what was deployed, delete it")
	flag.BoolVar(&o.stacks, "stacks", false, "with -deploy: the same for stacks/controller.yaml and two stacks/consumer.yaml (one on a queue that exists)")
	flag.StringVar(&o.rie, "rie", "", "the Runtime Interface Emulator (default $SLUICE_RIE_BIN, .cache/bin/aws-lambda-rie, PATH)")
	flag.StringVar(&o.emulator, "emulator", "qemu-aarch64-static", "runs the aarch64 bootstraps on another architecture")
	flag.StringVar(&o.logDir, "logs", "", "directory for the logs of the emulators (default: a temporary directory)")
	flag.Parse()
	os.Exit(run(o))
}

func run(o options) int {
	r := &runner{o: o}
	r.Name, r.Start = "samdeploy", time.Now()
	r.Main(20*time.Minute, func() error { return nil }, func() error {
		r.build()
		if o.deploy {
			r.res.deployed = &deployed{TypesLeftOut: map[string]string{}, ResourcesLeftOut: []string{}}
		}
		if !r.res.BuildOK {
			return nil
		}
		// The stacks deploy beside the quick start (their names differ):
		// most of either is waiting on the endpoint.
		var stacks *runner
		done := make(chan struct{})
		go func() {
			defer close(done)
			if o.stacks {
				stacks = &runner{o: o}
				stacks.Name, stacks.Start, stacks.Ctx = "samdeploy-stacks", r.Start, r.Ctx
				stacks.deployStacks()
			}
		}()
		if o.deploy {
			r.deployAndRun()
		}
		<-done
		if stacks != nil {
			r.res.stacksReport = stacks.res.stacksReport
			r.Failures = append(r.Failures, stacks.Failures...)
			if r.res.deployed == nil {
				r.res.deployed = stacks.res.deployed
			}
		}
		return nil
	})
	return r.Report(&r.res, &r.res.Verdict)
}

// runner carries the run's state from step to step.
type runner struct {
	e2ekit.Run
	o   options
	res result
}
