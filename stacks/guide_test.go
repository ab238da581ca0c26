package stacks

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/pkg/adapter/awsconf"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbstore"
)

// guide returns docs/controller.md's "A first deployment" section and its
// shell commands (continuation lines joined).
func guide(t *testing.T) (string, []string) {
	t.Helper()
	doc := read(t, "../docs/controller.md")
	i := strings.Index(doc, "## A first deployment\n")
	if i < 0 {
		t.Fatal("docs/controller.md has no section A first deployment")
	}
	section := doc[i:]
	section = section[:strings.Index(section[3:], "\n## ")+3]
	var cmds []string
	for _, b := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(section, -1) {
		for _, c := range strings.Split(strings.ReplaceAll(b[1], "\\\n", " "), "\n") {
			if c = strings.Join(strings.Fields(c), " "); c != "" {
				cmds = append(cmds, c)
			}
		}
	}
	if len(cmds) < 5 {
		t.Fatalf("the guide has %d commands", len(cmds))
	}
	return section, cmds
}

// TestGuideOneLoop: the walk-through names one loop throughout (its
// commands, its parameters, the PARAMS file it loads) and sets the safe
// rate of the shadow step to the fixed rate it says the team runs today.
func TestGuideOneLoop(t *testing.T) {
	section, _ := guide(t)
	loops := map[string]bool{}
	for _, m := range regexp.MustCompile("(?:--loop |LoopId=`?)([a-z0-9_-]+)").FindAllStringSubmatch(section, -1) {
		loops[m[1]] = true
	}
	loops[regexp.MustCompile(`"pk": \{"S": "([^"]+)"\}`).FindStringSubmatch(read(t, "../infra/params/shadow.json"))[1]] = true
	delete(loops, "billing") // the example of a second stack
	if len(loops) != 1 || !loops["orders"] {
		t.Errorf("the guide names the loops %v; want orders alone", loops)
	}
	fixed := regexp.MustCompile(`fixed (\d+) messages/s`).FindStringSubmatch(section)
	if fixed == nil || !strings.Contains(section, "ConsumerSafeRate="+fixed[1]) {
		t.Errorf("the shadow step's ConsumerSafeRate is not the fixed rate the guide starts from (%v)", fixed)
	}
	if !strings.Contains(section, "ControllerPrometheusURL") || !strings.Contains(section, "ControllerSubnetIds") {
		t.Error("the guide does not say how the controller reaches a Prometheus")
	}
}

// TestGuideCommands runs the guide's commands on the local stack, in order:
// the SAM ones are checked against samconfig.toml and the templates (`make
// deploy-local` runs those deployments), the others run as written on a
// table and a secret of this test.
func TestGuideCommands(t *testing.T) {
	_, cmds := guide(t)
	ep := testenv.AWSEndpoint(t)
	root := testenv.ModuleRoot(t)
	ctx := context.Background()
	cfg, err := awsconf.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4)
	rand.Read(b)
	id := "guide-" + hex.EncodeToString(b)
	ddb := dynamodb.NewFromConfig(cfg)
	if err := ddbstore.CreateTable(ctx, ddb, id); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ddb.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(id)}) })
	sluice := filepath.Join(t.TempDir(), "sluice")
	if out, err := exec.Command("go", "build", "-o", sluice, filepath.Join(root, "cmd", "sluice")).CombinedOutput(); err != nil {
		t.Fatalf("build sluice: %v: %s", err, out)
	}
	env := append(os.Environ(), "AWS_ENDPOINT_URL="+ep, "TABLE="+id, "SLUICE_TABLE="+id)
	samconfig := read(t, "../samconfig.toml")
	ran := 0
	for _, c := range cmds {
		switch {
		case strings.HasPrefix(c, "$SAM "):
			checkSAM(t, c, samconfig)
		case strings.HasPrefix(c, "TABLE=$(aws cloudformation describe-stacks"):
			if !strings.Contains(c, "--stack-name sluice-controller") || !strings.Contains(read(t, "controller.yaml"), "\n  TableName:\n    Description") {
				t.Errorf("%q: not the controller stack's TableName output", c)
			}
		case c == "export SLUICE_TABLE=$TABLE":
		case strings.HasPrefix(c, "aws secretsmanager create-secret --name sluice/orders-db "):
			name := "sluice/" + id
			c = strings.Replace(c, "sluice/orders-db", name, 1)
			t.Cleanup(func() {
				secretsmanager.NewFromConfig(cfg).DeleteSecret(ctx, &secretsmanager.DeleteSecretInput{SecretId: aws.String(name), ForceDeleteWithoutRecovery: aws.Bool(true)})
			})
			run(t, root, env, c)
			ran++
		case strings.HasPrefix(c, "aws dynamodb "):
			run(t, root, env, c)
			ran++
		case strings.HasPrefix(c, "go run ./cmd/sluice "):
			out := run(t, root, env, sluice+strings.TrimPrefix(c, "go run ./cmd/sluice"))
			if strings.Contains(c, "params get") && !strings.Contains(out, "orders") {
				t.Errorf("%q: %s", c, out)
			}
			ran++
		default:
			t.Errorf("the guide's command %q is neither run nor checked here", c)
		}
	}
	item, err := ddb.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(id),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "orders"}, "sk": &types.AttributeValueMemberS{Value: "PARAMS"}}})
	if mode, ok := item.Item["mode"].(*types.AttributeValueMemberS); err != nil || !ok || mode.Value != "auto" {
		t.Errorf("after the guide, the loop's PARAMS: %v (%v); want mode auto", item, err)
	}
	if ran < 4 {
		t.Errorf("ran %d of the guide's commands", ran)
	}
}

// run runs c with bash in dir and returns its output.
func run(t *testing.T, dir string, env []string, c string) string {
	t.Helper()
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", c)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v: %s", c, err, out)
	}
	return string(out)
}

// checkSAM checks a SAM command of the guide: its config environment
// exists in samconfig.toml and names a template that exists.
func checkSAM(t *testing.T, c, samconfig string) {
	t.Helper()
	m := regexp.MustCompile(`--config-env (\w+)`).FindStringSubmatch(c)
	if m == nil {
		if !strings.HasPrefix(c, "$SAM delete ") {
			t.Errorf("%q names no config environment", c)
		}
		return
	}
	tm := regexp.MustCompile(`(?m)^\[` + m[1] + `\.build\.parameters\]\n(?:.*\n)*?template_file = "([^"]+)"`).FindStringSubmatch(samconfig)
	if tm == nil {
		t.Errorf("%q: samconfig.toml has no template_file for %s", c, m[1])
		return
	}
	if _, err := os.Stat(filepath.Join("..", tm[1])); err != nil {
		t.Errorf("%q: %v", c, err)
	}
}
