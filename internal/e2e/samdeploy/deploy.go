package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/sluice-dev/sluice/pkg/adapter/awsconf"
	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink"
)

// deployment names what one run deploys; every name is unique to the run,
// since others use the same endpoint at the same time.
type deployment struct {
	stack, bucket, table, queue, loop, db, secret string
	// endpoint is the local endpoint as the SAM CLI must see it (host
	// localhost: moto reads the template's S3 address correctly only then).
	endpoint string
	// dsn is the destination database (MariaDB).
	dsn string
	// params are the stack's parameter overrides.
	params []string
	// buildDir is where sam build wrote the stack's template and bootstraps.
	buildDir string
	// typesLeftOut and resourcesLeftOut are what the expansion left out
	// (types the endpoint cannot create, and what depends on them).
	typesLeftOut     map[string]string
	resourcesLeftOut []string
}

func newDeployment(buildDir string) (*deployment, error) {
	ep := os.Getenv("AWS_ENDPOINT_URL")
	if ep == "" {
		return nil, errors.New("AWS_ENDPOINT_URL is not set: deploy-local needs the local endpoint (eval \"$(make -s env)\")")
	}
	u, err := url.Parse(ep)
	if err != nil {
		return nil, fmt.Errorf("AWS_ENDPOINT_URL=%q: %w", ep, err)
	}
	u.Host = "localhost:" + u.Port()
	dsn := os.Getenv("SLUICE_MYSQL_DSN")
	if dsn == "" {
		return nil, errors.New("SLUICE_MYSQL_DSN is not set: deploy-local stores its batch in MariaDB")
	}
	b := make([]byte, 4)
	rand.Read(b)
	id := "sluice-dl-" + hex.EncodeToString(b)
	d := &deployment{stack: id, bucket: id + "-artifacts", table: id, queue: id + "-queue", loop: id, db: id + "-db", secret: id + "/mysql", endpoint: u.String(), dsn: dsn, buildDir: buildDir}
	d.params = []string{
		"TableName=" + d.table, "QueueName=" + d.queue, "LoopId=" + d.loop, "DBInstanceIdentifier=" + d.db,
		"ConsumerSink=mysql", "ConsumerMySQLSecretName=" + d.secret, "ConsumerMaxConcurrency=2",
		// The optional ECS worker: deployed (cluster, roles, task
		// definition, service), not run (the endpoint runs no container).
		"WorkerImage=000000000000.dkr.ecr.us-east-1.amazonaws.com/sluice-worker:local", "WorkerSubnetIds=subnet-0123456789abcdef0",
	}
	return d, nil
}

// awsEnv is the environment of the SAM CLI and AWS CLI calls.
func (d *deployment) awsEnv() []string {
	return []string{"AWS_ENDPOINT_URL=" + d.endpoint, "AWS_ENDPOINT_URL_SQS=" + d.endpoint}
}

// aws runs the AWS CLI against the local endpoint and decodes its JSON
// output into out (unless nil).
func (r *runner) aws(d *deployment, out any, args ...string) error {
	b, err := r.command(d.awsEnv(), "aws", append([]string{"--endpoint-url", d.endpoint, "--output", "json"}, args...)...)
	if err != nil || out == nil {
		return err
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("aws %s: decode output: %w", args[0], err)
	}
	return nil
}

// deployAndRun is -deploy: prepare, deploy, run, delete, clean up.
func (r *runner) deployAndRun() {
	d, err := newDeployment(r.o.buildDir)
	if err != nil {
		r.Fail("%v", err)
		return
	}
	r.res.Stack = d.stack
	defer r.cleanUp(d)
	if err := r.prepare(d); err != nil {
		r.Fail("prepare: %v", err)
		return
	}
	err = r.deploy(d)
	if d.typesLeftOut != nil {
		r.res.TypesLeftOut, r.res.ResourcesLeftOut = d.typesLeftOut, d.resourcesLeftOut
	}
	if err != nil {
		r.Fail("deploy: %v", err)
	} else if st, err := r.inspect(d); err != nil {
		r.Fail("inspect the stack: %v", err)
	} else {
		r.runDeployed(d, st)
	}
	r.delete(d)
}

// prepare creates what a user has before a deployment: the artifact bucket,
// the secret holding the DSN, and the schema (the migration step, with the
// migrating user's DSN; the consumers then need no DDL).
func (r *runner) prepare(d *deployment) error {
	if err := r.aws(d, nil, "s3api", "create-bucket", "--bucket", d.bucket); err != nil {
		return err
	}
	cfg, err := awsconf.Load(r.Ctx)
	if err != nil {
		return err
	}
	sm := secretsmanager.NewFromConfig(cfg)
	if _, err := sm.CreateSecret(r.Ctx, &secretsmanager.CreateSecretInput{Name: aws.String(d.secret), SecretString: aws.String(d.dsn)}); err != nil {
		return fmt.Errorf("create secret %s: %w", d.secret, err)
	}
	db, err := sql.Open("mysql", d.dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	r.Logf("migrating the destination's schema (the step `sluice migrate` runs)")
	return mysqlsink.Migrate(r.Ctx, db)
}

// deploy packages the built template (code to the bucket), expands the
// transform locally and deploys the result with sam deploy.
func (r *runner) deploy(d *deployment) error {
	dir := filepath.Join(d.buildDir, "..", "deploy-local-"+d.stack)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	expanded := filepath.Join(dir, "expanded.json")
	// One package per built template and bucket: stacks of the same
	// template (two consumer stacks, a second deployment) share its code.
	packaged := filepath.Join(d.buildDir, "packaged-"+d.bucket+".yaml")
	if _, err := os.Stat(packaged); err != nil {
		if _, err := r.command(d.awsEnv(), r.o.sam, "package", "--template-file", filepath.Join(d.buildDir, "template.yaml"),
			"--s3-bucket", d.bucket, "--output-template-file", packaged); err != nil {
			return err
		}
	}
	python := filepath.Join(filepath.Dir(r.o.sam), "python")
	out, err := r.command(nil, python, append([]string{r.o.expand, packaged, expanded}, d.params...)...)
	if err != nil {
		return err
	}
	var left struct {
		Types     map[string]string `json:"types_left_out"`
		Resources []string          `json:"resources_left_out"`
	}
	if err := json.Unmarshal([]byte(lastLines(string(out), 1)), &left); err != nil {
		return fmt.Errorf("expand: decode its report: %w", err)
	}
	d.typesLeftOut, d.resourcesLeftOut = left.Types, left.Resources
	args := []string{"deploy", "--template-file", expanded, "--stack-name", d.stack, "--s3-bucket", d.bucket,
		"--capabilities", "CAPABILITY_IAM", "CAPABILITY_NAMED_IAM", "--no-confirm-changeset", "--no-fail-on-empty-changeset"}
	if len(d.params) > 0 {
		args = append(append(args, "--parameter-overrides"), d.params...)
	}
	_, err = r.command(d.awsEnv(), r.o.sam, args...)
	return err
}

// delete runs sam delete and checks that the stack is gone.
func (r *runner) delete(d *deployment) {
	if err := r.deleteStack(d); err != nil {
		r.Fail("delete: %v", err)
		return
	}
	r.res.Deleted = true
}

// deleteStack runs sam delete on d's stack and checks that it is gone.
func (r *runner) deleteStack(d *deployment) error {
	if _, err := r.command(d.awsEnv(), r.o.sam, "delete", "--stack-name", d.stack, "--s3-bucket", d.bucket, "--no-prompts"); err != nil {
		return err
	}
	err := r.aws(d, nil, "cloudformation", "describe-stacks", "--stack-name", d.stack)
	if err == nil || !strings.Contains(err.Error(), "does not exist") {
		return fmt.Errorf("stack %s still described after sam delete (%v)", d.stack, err)
	}
	return nil
}

// cleanUp removes what the stack retains or never owned: the table
// (DeletionPolicy Retain), the secret, the bucket, the rows stored.
func (r *runner) cleanUp(d *deployment) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Ctx), defaultStepTimeout)
	defer cancel()
	cfg, err := awsconf.Load(ctx)
	if err != nil {
		return
	}
	dynamodb.NewFromConfig(cfg).DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(d.table)})
	secretsmanager.NewFromConfig(cfg).DeleteSecret(ctx, &secretsmanager.DeleteSecretInput{SecretId: aws.String(d.secret), ForceDeleteWithoutRecovery: aws.Bool(true)})
	r.aws(d, nil, "s3", "rb", "s3://"+d.bucket, "--force")
}
