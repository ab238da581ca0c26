package main

import (
	"encoding/json"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The worker's deployment as template.yaml declares it, read from the
// template itself (the repository has no YAML parser: the checks read the
// indented blocks they need, which the template keeps one key a line).

// block returns the lines under the key path (each key one indentation
// level deeper than the last), without the key's own line.
func block(t *testing.T, text string, path ...string) []string {
	t.Helper()
	lines := strings.Split(text, "\n")
	indent := -1
	for _, key := range path {
		found := false
		for i, l := range lines {
			trimmed := strings.TrimLeft(l, " ")
			in := len(l) - len(trimmed)
			if in > indent && strings.HasPrefix(trimmed, key+":") {
				indent, lines, found = in, lines[i+1:], true
				break
			}
		}
		if !found {
			t.Fatalf("template.yaml has no %s", strings.Join(path, "."))
		}
	}
	for i, l := range lines {
		trimmed := strings.TrimLeft(l, " ")
		if trimmed != "" && !strings.HasPrefix(trimmed, "#") && len(l)-len(trimmed) <= indent {
			return lines[:i]
		}
	}
	return lines
}

// value returns the scalar after "key:" in lines, unquoted.
func value(t *testing.T, lines []string, key string) string {
	t.Helper()
	for _, l := range lines {
		if v, ok := strings.CutPrefix(strings.TrimLeft(l, " -"), key+":"); ok {
			return strings.Trim(strings.TrimSpace(v), `"`)
		}
	}
	t.Fatalf("no %s in the block", key)
	return ""
}

func template(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func container(t *testing.T) []string {
	return block(t, template(t), "Resources", "WorkerTaskDefinition", "Properties", "ContainerDefinitions")
}

// TestTemplateStopTimeoutCoversDrain: the deployed task's StopTimeout, as
// the task definition JSON's, is above the worker's worst-case drain.
func TestTemplateStopTimeoutCoversDrain(t *testing.T) {
	v := value(t, container(t), "StopTimeout")
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("StopTimeout %q: %v", v, err)
	}
	if got := time.Duration(n) * time.Second; got <= drain() {
		t.Errorf("template.yaml StopTimeout %v; want above the worst-case drain %v", got, drain())
	}
}

// TestTemplateSecretsAreARNs: ECS reads a ValueFrom that is not a full
// Secrets Manager ARN as an SSM parameter; every one the worker's task
// gets must be a parameter whose pattern admits only such ARNs.
func TestTemplateSecretsAreARNs(t *testing.T) {
	text := template(t)
	n := 0
	for _, l := range container(t) {
		v, ok := strings.CutPrefix(strings.TrimSpace(l), "ValueFrom:")
		if !ok {
			continue
		}
		n++
		param, ok := strings.CutPrefix(strings.TrimSpace(v), "!Ref ")
		if !ok {
			t.Errorf("ValueFrom %q; want !Ref of a parameter holding the secret's ARN", v)
			continue
		}
		pattern := value(t, block(t, text, "Parameters", param), "AllowedPattern")
		re := regexp.MustCompile(strings.ReplaceAll(pattern, `\\`, `\`))
		for in, want := range map[string]bool{
			"arn:aws:secretsmanager:eu-west-1:123456789012:secret:sluice/kafka-AbC123": true,
			"sluice/kafka": false, "": true,
		} {
			if re.MatchString(in) != want {
				t.Errorf("parameter %s (AllowedPattern %q) matches %q: %v; want %v", param, pattern, in, !want, want)
			}
		}
	}
	if n == 0 {
		t.Fatal("the worker's task has no ValueFrom: the test reads the wrong block")
	}
}

// TestTemplateWorkerDoesNotMigrate: the task's user has no CREATE right
// (migrations are `sluice migrate`), so the worker does not migrate at
// start unless SLUICE_MIGRATE=on asks it to.
func TestTemplateWorkerDoesNotMigrate(t *testing.T) {
	for _, l := range container(t) {
		if strings.Contains(l, "SLUICE_MIGRATE") && !strings.Contains(l, `"off"`) {
			t.Errorf("template.yaml's worker sets %s; want SLUICE_MIGRATE absent or off", strings.TrimSpace(l))
		}
	}
	c, err := loadConfig(func(k string) string {
		return map[string]string{"SLUICE_QUEUE_URL": "http://q", "SLUICE_MYSQL_DSN": "u:p@tcp(db)/app"}[k]
	})
	if err != nil || c.DB.Migrate {
		t.Errorf("loadConfig without SLUICE_MIGRATE: migrate %v (%v); want off", c.DB.Migrate, err)
	}
	c, err = loadConfig(func(k string) string {
		return map[string]string{"SLUICE_QUEUE_URL": "http://q", "SLUICE_MYSQL_DSN": "u:p@tcp(db)/app", "SLUICE_MIGRATE": "on"}[k]
	})
	if err != nil || !c.DB.Migrate {
		t.Errorf("loadConfig with SLUICE_MIGRATE=on: migrate %v (%v); want on", c.DB.Migrate, err)
	}
}

// TestWorkerImageMatchesTaskArchitecture: the image `make worker-image`
// builds runs on the CPU the task definitions (template and JSON) ask for.
func TestWorkerImageMatchesTaskArchitecture(t *testing.T) {
	arch := value(t, block(t, template(t), "Resources", "WorkerTaskDefinition", "Properties", "RuntimePlatform"), "CpuArchitecture")
	b, err := os.ReadFile("../../infra/worker/task-definition.json")
	if err != nil {
		t.Fatal(err)
	}
	var td struct {
		RuntimePlatform struct {
			CPUArchitecture string `json:"cpuArchitecture"`
		} `json:"runtimePlatform"`
	}
	if err := json.Unmarshal(b, &td); err != nil {
		t.Fatal(err)
	}
	if td.RuntimePlatform.CPUArchitecture != arch {
		t.Errorf("task-definition.json cpuArchitecture %q; template.yaml %q", td.RuntimePlatform.CPUArchitecture, arch)
	}
	mk, err := os.ReadFile("../../mk/consumers.mk")
	if err != nil {
		t.Fatal(err)
	}
	recipe := regexp.MustCompile(`(?m)^worker-image:.*\n((?:\t.*\n)+)`).FindSubmatch(mk)
	if recipe == nil {
		t.Fatal("mk/consumers.mk has no worker-image recipe")
	}
	want := "--platform linux/" + strings.ToLower(arch)
	if !strings.Contains(string(recipe[1]), want) {
		t.Errorf("worker-image recipe %q; want it to build %s", recipe[1], want)
	}
}

// TestTemplateAcceptsManagedSecrets: RDS names the secrets it manages
// rds!db-UUID and rds!cluster-UUID; the database secret's parameter
// accepts those, plain names and ARNs, and passes host, port and database
// (which a managed secret does not hold) to the Lambdas and the worker.
func TestTemplateAcceptsManagedSecrets(t *testing.T) {
	text := template(t)
	pattern := value(t, block(t, text, "Parameters", "ConsumerMySQLSecretName"), "AllowedPattern")
	re := regexp.MustCompile(strings.ReplaceAll(pattern, `\\`, `\`))
	for in, want := range map[string]bool{
		"": true, "sluice/orders-db": true,
		"rds!db-0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d":                                      true,
		"rds!cluster-0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d":                                 true,
		"arn:aws:secretsmanager:eu-west-1:123456789012:secret:rds!db-0a1b2c3d-4e5f-AbC123": true,
		"arn:aws:secretsmanager:eu-west-1:123456789012:secret:sluice/orders-db-AbC123":     true,
		"sluice orders": false,
	} {
		if re.MatchString(in) != want {
			t.Errorf("ConsumerMySQLSecretName (AllowedPattern %q) matches %q: %v; want %v", pattern, in, !want, want)
		}
	}
	for _, env := range []string{"SLUICE_MYSQL_HOST", "SLUICE_MYSQL_PORT", "SLUICE_MYSQL_DATABASE"} {
		if n := strings.Count(text, env+":"); n < 2 {
			t.Errorf("template.yaml sets %s for %d Lambdas; want both consumer Lambdas", env, n)
		}
		if !strings.Contains(strings.Join(container(t), "\n"), "Name: "+env+",") {
			t.Errorf("template.yaml's worker does not set %s", env)
		}
	}
}
