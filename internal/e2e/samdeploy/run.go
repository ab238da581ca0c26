package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"time"

	"github.com/sluice-dev/sluice/internal/e2e/controller/harness"
	"github.com/sluice-dev/sluice/internal/e2e/e2ekit"
)

// defaultStepTimeout bounds each clean-up call.
const defaultStepTimeout = time.Minute

// resource is one resource of the deployed stack.
type resource struct {
	Logical  string `json:"LogicalResourceId"`
	Physical string `json:"PhysicalResourceId"`
	Type     string `json:"ResourceType"`
	Status   string `json:"ResourceStatus"`
}

// stackInfo is what the endpoint says was deployed.
type stackInfo struct {
	resources []resource
}

// ofType returns the resources of type t, sorted by logical id.
func (s stackInfo) ofType(t string) []resource {
	var out []resource
	for _, r := range s.resources {
		if r.Type == t {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Logical < out[j].Logical })
	return out
}

// inspect reads the stack's status and resources back from the endpoint.
func (r *runner) inspect(d *deployment) (stackInfo, error) {
	var stacks struct {
		Stacks []struct {
			StackStatus string `json:"StackStatus"`
		} `json:"Stacks"`
	}
	if err := r.aws(d, &stacks, "cloudformation", "describe-stacks", "--stack-name", d.stack); err != nil {
		return stackInfo{}, err
	}
	if len(stacks.Stacks) != 1 {
		return stackInfo{}, fmt.Errorf("describe-stacks %s: %d stacks", d.stack, len(stacks.Stacks))
	}
	r.res.StackStatus = stacks.Stacks[0].StackStatus
	var list struct {
		Summaries []resource `json:"StackResourceSummaries"`
	}
	if err := r.aws(d, &list, "cloudformation", "list-stack-resources", "--stack-name", d.stack); err != nil {
		return stackInfo{}, err
	}
	for _, res := range list.Summaries {
		if res.Status == "CREATE_COMPLETE" {
			r.res.ResourcesCreated++
		}
	}
	for _, res := range list.Summaries {
		if res.Type == "AWS::ECS::Service" && res.Status == "CREATE_COMPLETE" {
			r.res.WorkerServiceCreated = true
		}
	}
	if r.res.StackStatus != "CREATE_COMPLETE" {
		return stackInfo{list.Summaries}, fmt.Errorf("stack %s is %s", d.stack, r.res.StackStatus)
	}
	return stackInfo{list.Summaries}, nil
}

// function is a deployed function running under an emulator.
type function struct {
	logical, arn string
	rie          *harness.RIE
}

// functionConfig is the part of GetFunctionConfiguration used here.
type functionConfig struct {
	FunctionArn string `json:"FunctionArn"`
	MemorySize  int    `json:"MemorySize"`
	Environment struct {
		// Variables are strings in Lambda's API; moto returns the
		// values of Number parameters as numbers.
		Variables map[string]any `json:"Variables"`
	} `json:"Environment"`
}

// startFunctions reads each deployed function's configuration back and
// starts its built bootstrap under the emulator with that environment,
// plus what the Lambda service gives every function (credentials, region,
// its name) and the local endpoint.
func (r *runner) startFunctions(d *deployment, st stackInfo) (map[string]*function, error) {
	rie, err := e2ekit.FindRIE(r.o.rie, "")
	if err != nil {
		return nil, err
	}
	if r.o.logDir == "" {
		if r.o.logDir, err = os.MkdirTemp("", "deploy-local-"); err != nil {
			return nil, err
		}
	}
	fns := map[string]*function{}
	for _, res := range st.ofType("AWS::Lambda::Function") {
		var fc functionConfig
		if err := r.aws(d, &fc, "lambda", "get-function-configuration", "--function-name", res.Physical); err != nil {
			return fns, err
		}
		boot, err := r.runnable(filepath.Join(r.o.buildDir, res.Logical, "bootstrap"))
		if err != nil {
			return fns, err
		}
		env := serviceEnv(res.Physical, fc.MemorySize)
		for k, v := range fc.Environment.Variables {
			env = append(env, fmt.Sprintf("%s=%v", k, v))
		}
		p, err := harness.StartRIEClean(r.Ctx, rie, boot, r.o.logDir, d.stack+"-"+res.Logical, env)
		if err != nil {
			return fns, fmt.Errorf("start %s: %w", res.Logical, err)
		}
		r.Logf("%s (%s) runs under the emulator, %d variables from its configuration", res.Logical, res.Physical, len(fc.Environment.Variables))
		fns[res.Logical] = &function{logical: res.Logical, arn: fc.FunctionArn, rie: p}
	}
	return fns, nil
}

// serviceEnv is what the Lambda service sets for every function, with the
// local endpoint (for SQS too: the stack's queues are the endpoint's).
func serviceEnv(name string, memory int) []string {
	env := []string{
		"AWS_LAMBDA_FUNCTION_NAME=" + name,
		fmt.Sprintf("AWS_LAMBDA_FUNCTION_MEMORY_SIZE=%d", memory),
		"AWS_ENDPOINT_URL=" + os.Getenv("AWS_ENDPOINT_URL"),
		"AWS_ENDPOINT_URL_SQS=" + os.Getenv("AWS_ENDPOINT_URL"),
	}
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_DEFAULT_REGION", "TZ"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, fmt.Sprintf("%s=%v", k, v))
		}
	}
	return env
}

// runnable returns a path the emulator can execute for the aarch64
// bootstrap: the bootstrap itself on arm64, else a script that runs it
// under the user-mode emulator.
func (r *runner) runnable(bootstrap string) (string, error) {
	abs, err := filepath.Abs(bootstrap)
	if err != nil {
		return "", err
	}
	if runtime.GOARCH == "arm64" {
		r.res.RanUnder = "native"
		return abs, nil
	}
	emu, err := exec.LookPath(r.o.emulator)
	if err != nil {
		return "", fmt.Errorf("%s: %w (apt-get install qemu-user-static runs aarch64 bootstraps on %s)", r.o.emulator, err, runtime.GOARCH)
	}
	r.res.RanUnder = filepath.Base(emu)
	script := filepath.Join(r.o.logDir, filepath.Base(filepath.Dir(abs))+"-bootstrap")
	body := fmt.Sprintf("#!/bin/sh\nexec %s %s \"$@\"\n", emu, abs)
	return script, os.WriteFile(script, []byte(body), 0o755)
}

// runDeployed starts the deployed functions, ticks the controller through
// the schedule's target and sends a batch through the event source
// mapping's queue, then stops the emulators.
func (r *runner) runDeployed(d *deployment, st stackInfo) {
	fns, err := r.startFunctions(d, st)
	defer func() {
		for _, f := range fns {
			f.rie.Stop()
		}
	}()
	if err != nil {
		r.Fail("start the functions: %v", err)
		return
	}
	if err := r.tick(d, st, fns); err != nil {
		r.Fail("tick: %v", err)
	} else {
		r.res.TickOK = true
	}
	n, err := r.batch(d, fns)
	r.res.RowsStored = n
	if err != nil {
		r.Fail("batch: %v", err)
	} else {
		r.res.BatchOK = true
	}
}

// target returns the running function whose ARN is arn.
func target(fns map[string]*function, arn string) (*function, error) {
	for _, f := range fns {
		if f.arn == arn {
			return f, nil
		}
	}
	return nil, fmt.Errorf("no deployed function has the ARN %s", arn)
}

// invoke posts payload to f and decodes its response into out.
func invoke(r *runner, f *function, payload any, out any) error {
	b, err := json.Marshal(payload)
	if err != nil {
		return err
	}
	resp, err := f.rie.Invoke(r.Ctx, b)
	if err != nil {
		return fmt.Errorf("%w (log: %s)", err, f.rie.LogPath())
	}
	if err := json.NewDecoder(bytes.NewReader(resp)).Decode(out); err != nil {
		return fmt.Errorf("%s's response %s: %w", f.logical, resp, err)
	}
	return nil
}
