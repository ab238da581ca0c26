// Package stacks holds the controller stack and the consumer stack
// (build.py builds them from template.yaml's pieces); its tests read the
// templates themselves.
package stacks

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

func read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// entries returns the top-level entries (two-space keys) of section, each
// with its lines.
func entries(t *testing.T, text, section string) map[string]string {
	t.Helper()
	out := map[string]string{}
	in, key := false, ""
	for _, l := range strings.Split(text, "\n") {
		switch {
		case l == section+":":
			in = true
		case in && l != "" && !strings.HasPrefix(l, " ") && !strings.HasPrefix(l, "#"):
			in = false
		case in && strings.HasPrefix(l, "  ") && !strings.HasPrefix(l, "   ") && strings.HasSuffix(l, ":"):
			key = strings.TrimSuffix(strings.TrimSpace(l), ":")
		case in && key != "":
			out[key] += l + "\n"
		}
	}
	if len(out) == 0 {
		t.Fatalf("no %s", section)
	}
	return out
}

// TestControllerAlarmsCoverEveryLoop: the controller stack's alarms hold
// for any loop in its table (the two consumer stacks' loops and any added
// later): Metrics Insights queries over the Loop dimension or the
// controller function's own metrics, never one loop's dimension.
func TestControllerAlarmsCoverEveryLoop(t *testing.T) {
	n := 0
	for id, body := range entries(t, read(t, "controller.yaml"), "Resources") {
		if !strings.Contains(body, "Type: AWS::CloudWatch::Alarm") {
			continue
		}
		n++
		if strings.Contains(body, "Name: Loop") || strings.Contains(body, "LoopId") {
			t.Errorf("%s watches one loop", id)
		}
		query := regexp.MustCompile(`SELECT \w+\(\w+\) FROM SCHEMA\("\$\{MetricsNamespace\}", Loop\)'`).MatchString(body)
		controller := strings.Contains(body, "Value: !Ref ControllerFunction")
		if !query && !controller {
			t.Errorf("%s: neither a query over every loop nor the controller's own metric", id)
		}
		if strings.Contains(body, "WHERE") {
			t.Errorf("%s filters its query", id)
		}
	}
	if n < 4 {
		t.Errorf("controller.yaml has %d alarms; want errors, loop errors, stale, pinned at minimum, silent", n)
	}
	for id, body := range entries(t, read(t, "consumer.yaml"), "Resources") {
		if strings.Contains(body, "Name: Loop\n") && !strings.Contains(body, "Value: !Ref LoopId") {
			t.Errorf("consumer.yaml %s watches a loop that is not the stack's LoopId", id)
		}
	}
	dash := entries(t, read(t, "controller.yaml"), "Resources")["Dashboard"]
	if !strings.Contains(dash, `SEARCH('{${MetricsNamespace},Loop} MetricName=\"AllowedRate\"'`) {
		t.Errorf("the dashboard does not search every loop's AllowedRate")
	}
}

// TestConsumerStackNamesItsLoop: a consumer stack asks for its loop (no
// default), gives it to its consumer as SLUICE_LOOP, and takes the
// controller's table and an existing queue by parameter.
func TestConsumerStackNamesItsLoop(t *testing.T) {
	text := read(t, "consumer.yaml")
	params := entries(t, text, "Parameters")
	for _, p := range []string{"LoopId", "TableName"} {
		if strings.Contains(params[p], "Default:") {
			t.Errorf("consumer.yaml's %s has a default; a consumer stack must name it", p)
		}
	}
	if _, ok := params["ExistingQueueArn"]; !ok {
		t.Error("consumer.yaml takes no existing queue")
	}
	fn := entries(t, text, "Resources")["SqsConsumerFunction"]
	for _, want := range []string{"SLUICE_LOOP: !Ref LoopId\n", "SLUICE_TABLE: !Ref TableName\n",
		"Queue: !If [CreateQueue, !GetAtt ConsumerQueue.Arn, !Ref ExistingQueueArn]"} {
		if !strings.Contains(fn, want) {
			t.Errorf("consumer.yaml's function lacks %q", want)
		}
	}
	if !strings.Contains(entries(t, text, "Resources")["ConsumerQueue"], "Condition: CreateQueue") {
		t.Error("consumer.yaml creates its queue even when given one")
	}
}

// TestStacksAskOnlyWhatTheyNeed: `sam deploy --guided` asks every
// parameter; the controller stack has none of a consumer's, the consumer
// stack none of the controller's, and every parameter is used.
func TestStacksAskOnlyWhatTheyNeed(t *testing.T) {
	for file, foreign := range map[string]*regexp.Regexp{
		"controller.yaml": regexp.MustCompile(`^(Consumer|Worker|Kafka|Queue|LoopId|ExistingQueue)`),
		"consumer.yaml":   regexp.MustCompile(`^(Controller|Worker|Kafka|ScheduleExpression|MetricsNamespace|ManagedMapping)`),
	} {
		text := read(t, file)
		rest := text[strings.Index(text, "\nRules:"):]
		for p := range entries(t, text, "Parameters") {
			if foreign.MatchString(p) {
				t.Errorf("%s asks %s, which the other stack needs", file, p)
			}
			if !strings.Contains(rest, "!Ref "+p) && !strings.Contains(rest, "${"+p+"}") && !strings.Contains(rest, "Ref: "+p) {
				t.Errorf("%s asks %s and never uses it", file, p)
			}
		}
	}
}

// TestControllerStackTableAndMappings: the table's name is CloudFormation's
// unless one is given (a second stack, or a deploy after a failed one, does
// not collide with the retained table), it is exported for the consumer
// stacks, and the controller may resize the mappings the operator names,
// those only.
func TestControllerStackTableAndMappings(t *testing.T) {
	text := read(t, "controller.yaml")
	if p := entries(t, text, "Parameters")["TableName"]; !strings.Contains(p, `Default: ""`) {
		t.Errorf("TableName: %q; want an empty default", p)
	}
	res := entries(t, text, "Resources")
	if !strings.Contains(res["Table"], "TableName: !If [HasTableName, !Ref TableName, !Ref AWS::NoValue]") {
		t.Error("the table's name is fixed")
	}
	role := res["ControllerRole"]
	i := strings.Index(role, "Sid: ScaleMappings")
	if i < 0 || !strings.Contains(role[i:], "Resource: !Ref ManagedMappingArns") || !strings.Contains(role[:i], "- HasManagedMappings") {
		t.Errorf("ControllerRole: no ScaleMappings on ManagedMappingArns under HasManagedMappings")
	}
	if strings.Contains(role, "event-source-mapping:*") {
		t.Error("ControllerRole may update every mapping")
	}
	if !strings.Contains(entries(t, text, "Outputs")["TableName"], `Name: !Sub "${AWS::StackName}-TableName"`) {
		t.Error("the table's name is not exported")
	}
}
