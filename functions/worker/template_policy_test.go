package main

import (
	"context"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sluice-dev/sluice/pkg/adapter/ddbstore"
	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// The consumers' deployment as template.yaml declares it for every path
// (the SQS Lambda, the Kafka Lambda, the worker's task), read from the
// template itself with the helpers of template_test.go.

// consumerRoles are the roles of the three consumer paths.
var consumerRoles = []string{"SqsConsumerRole", "KafkaConsumerRole", "WorkerTaskRole"}

// statement returns the lines of the policy statement sid of role (from
// its "Sid:" line to the next statement at the same indentation).
func statement(t *testing.T, role, sid string) []string {
	t.Helper()
	lines := block(t, template(t), "Resources", role, "Properties", "Policies")
	for i, l := range lines {
		if strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(l), "- ")) != "Sid: "+sid {
			continue
		}
		in := len(l) - len(strings.TrimLeft(l, " -"))
		for j := i + 1; j < len(lines); j++ {
			tr := strings.TrimLeft(lines[j], " ")
			if tr != "" && !strings.HasPrefix(tr, "#") && len(lines[j])-len(tr) < in {
				return lines[i:j]
			}
		}
		return lines[i:]
	}
	t.Fatalf("%s has no statement %s", role, sid)
	return nil
}

// listAfter returns the items of the YAML list under key in lines.
func listAfter(t *testing.T, lines []string, key string) []string {
	t.Helper()
	for i, l := range lines {
		if strings.TrimSpace(strings.TrimLeft(l, " -")) != key+":" {
			continue
		}
		var items []string
		for _, m := range lines[i+1:] {
			v, ok := strings.CutPrefix(strings.TrimSpace(m), "- ")
			if !ok {
				break
			}
			items = append(items, strings.Trim(strings.TrimSpace(v), `"`))
		}
		return items
	}
	t.Fatalf("no %s in %q", key, lines)
	return nil
}

// iamLike reports whether s matches the IAM StringLike pattern p (* any
// run of characters, ? one character).
func iamLike(p, s string) bool {
	re := "^" + strings.NewReplacer(`\*`, ".*", `\?`, ".").Replace(regexp.QuoteMeta(p)) + "$"
	return regexp.MustCompile(re).MatchString(s)
}

// call is one DynamoDB request a consumer's store made: its IAM action,
// whether it went to the by-sk index, and its partition key (the only key
// dynamodb:LeadingKeys conditions).
type call struct {
	action string
	index  bool
	pk     string
}

// keyRecorder is a DynamoDB stand-in that keeps what is put, answers gets
// from it, and records every request's action and partition key.
type keyRecorder struct {
	ddbstore.API
	items map[string]map[string]types.AttributeValue
	calls []call
}

func str(v types.AttributeValue) string { return v.(*types.AttributeValueMemberS).Value }

func (k *keyRecorder) GetItem(_ context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	k.calls = append(k.calls, call{action: "dynamodb:GetItem", pk: str(in.Key["pk"])})
	return &dynamodb.GetItemOutput{Item: k.items[str(in.Key["pk"])+"|"+str(in.Key["sk"])]}, nil
}

func (k *keyRecorder) PutItem(_ context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	k.calls = append(k.calls, call{action: "dynamodb:PutItem", pk: str(in.Item["pk"])})
	if k.items == nil {
		k.items = map[string]map[string]types.AttributeValue{}
	}
	k.items[str(in.Item["pk"])+"|"+str(in.Item["sk"])] = in.Item
	return &dynamodb.PutItemOutput{}, nil
}

func (k *keyRecorder) UpdateItem(_ context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	k.calls = append(k.calls, call{action: "dynamodb:UpdateItem", pk: str(in.Key["pk"])})
	return &dynamodb.UpdateItemOutput{}, nil
}

func (k *keyRecorder) Query(_ context.Context, in *dynamodb.QueryInput, _ ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	c := call{action: "dynamodb:Query", index: in.IndexName != nil}
	if c.index {
		c.pk = str(in.ExpressionAttributeValues[":sk"]) // the index's partition key is the table's sort key
	} else {
		c.pk = str(in.ExpressionAttributeValues[":pk"])
	}
	k.calls = append(k.calls, c)
	return &dynamodb.QueryOutput{}, nil
}

// consumerCalls runs what a consumer's store does in one refresh (read
// RATE, report the lease, count the live peers), with the controller's
// RATE written (lease layout 2, what every controller writes) or not yet
// (layout 1), and returns the requests it made.
func consumerCalls(t *testing.T, loop string, rate bool) []call {
	t.Helper()
	rec := &keyRecorder{}
	now := time.Now()
	if rate {
		if err := ddbstore.New(rec, "sluice").WriteRate(context.Background(), protocol.Rate{Loop: loop, PerSecond: 10, WrittenAt: now, ExpiresAt: now.Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	rec.calls = nil // the controller's write, not the consumer's
	st := ddbstore.New(rec, "sluice")
	if _, err := st.ReadRate(context.Background(), loop); (err == nil) != rate {
		t.Fatalf("ReadRate with RATE written %v: %v", rate, err)
	}
	if err := st.ReportPeer(context.Background(), protocol.Peer{Loop: loop, Instance: "i-1", StartedAt: now, ReportedAt: now, ExpiresAt: now.Add(15 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.LivePeers(context.Background(), loop, now); err != nil {
		t.Fatal(err)
	}
	return rec.calls
}

// grant is one Allow statement of a role's policies, as far as DynamoDB
// needs it: its actions, whether its resource is the by-sk index or the
// table, and its dynamodb:LeadingKeys condition.
type grant struct {
	sid     string
	actions []string
	index   bool
	like    bool     // ForAllValues:StringLike (else StringEquals)
	keys    []string // the condition's values, ${LoopId} and !Ref LoopId replaced by the loop
}

// grants reads the DynamoDB statements of role's policies.
func grants(t *testing.T, role, loop string) []grant {
	t.Helper()
	var out []grant
	for _, l := range block(t, template(t), "Resources", role, "Properties", "Policies") {
		sid, ok := strings.CutPrefix(strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(l), "- ")), "Sid: ")
		if !ok {
			continue
		}
		st := statement(t, role, sid)
		text := strings.Join(st, "\n")
		if !strings.Contains(text, "dynamodb:") {
			continue
		}
		g := grant{sid: sid, actions: listAfter(t, st, "Action"), index: strings.Contains(text, "/index/by-sk"), like: strings.Contains(text, "StringLike")}
		if strings.Contains(text, "dynamodb:LeadingKeys") {
			for _, k := range listAfter(t, st, "dynamodb:LeadingKeys") {
				k = strings.Trim(strings.TrimPrefix(k, "!Sub "), `"`)
				g.keys = append(g.keys, strings.NewReplacer("${LoopId}", loop, "!Ref LoopId", loop).Replace(k))
			}
		}
		out = append(out, g)
	}
	return out
}

// allows reports whether g lets c through.
func (g grant) allows(c call) bool {
	if g.index != c.index || !slices.Contains(g.actions, c.action) {
		return false
	}
	if g.keys == nil {
		return g.index // the index's keys are every loop's sort key: reads only
	}
	for _, k := range g.keys {
		if (g.like && iamLike(k, c.pk)) || (!g.like && k == c.pk) {
			return true
		}
	}
	return false
}

// TestTemplateConsumerPolicyAllowsWhatTheStoreDoes: on every consumer
// path, each request a consumer's store makes in either lease layout (the
// RATE read, the lease, the live count and its query) is allowed by a
// statement of the role, and the same requests on another loop's keys, or
// a write to the loop's own RATE, are not: a consumer writes its lease
// and live counts only. Layout 2 is what every controller's RATE names,
// so a role without it fails every refresh in AWS although the local
// stack, which enforces no IAM, never shows it.
func TestTemplateConsumerPolicyAllowsWhatTheStoreDoes(t *testing.T) {
	const loop = "orders"
	for _, rate := range []bool{false, true} {
		calls := consumerCalls(t, loop, rate)
		for _, role := range consumerRoles {
			gs := grants(t, role, loop)
			allowed := func(c call) bool { return slices.ContainsFunc(gs, func(g grant) bool { return g.allows(c) }) }
			for _, c := range calls {
				if !allowed(c) {
					t.Errorf("RATE written %v: %s denies %s on pk %q (index %v), which the store makes", rate, role, c.action, c.pk, c.index)
				}
				if c.index {
					continue
				}
				for _, other := range []string{strings.Replace(c.pk, loop, "billing", 1), strings.Replace(c.pk, loop, loop+"2", 1)} {
					if o := (call{action: c.action, pk: other}); allowed(o) {
						t.Errorf("%s allows %s on another loop's pk %q", role, c.action, other)
					}
				}
			}
			for _, action := range []string{"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"} {
				if c := (call{action: action, pk: loop}); allowed(c) {
					t.Errorf("%s allows %s on the loop's own items (pk %q: RATE, PARAMS)", role, action, loop)
				}
			}
			policy := strings.Join(block(t, template(t), "Resources", role, "Properties", "Policies"), "\n")
			for _, action := range []string{"dynamodb:DeleteItem", "dynamodb:BatchWriteItem", "dynamodb:TransactWriteItems", "dynamodb:Scan"} {
				if strings.Contains(policy, action) {
					t.Errorf("%s grants %s, which no consumer needs", role, action)
				}
			}
		}
	}
	if p := value(t, block(t, template(t), "Parameters", "LoopId"), "AllowedPattern"); regexp.MustCompile(p).MatchString("orders*") || regexp.MustCompile(p).MatchString("orders#x") {
		t.Errorf("LoopId's AllowedPattern %q admits a wildcard or a #, which would widen the LeadingKeys patterns", p)
	}
}

// mysqlParams are the MySQL connection's variables, as every consumer
// path reads them, and the template parameters that set them.
var mysqlParams = map[string]string{
	"SLUICE_MYSQL_HOST": "ConsumerMySQLHost", "SLUICE_MYSQL_PORT": "ConsumerMySQLPort", "SLUICE_MYSQL_DATABASE": "ConsumerMySQLDatabase",
	"SLUICE_MYSQL_CA": "ConsumerMySQLCA", "SLUICE_MYSQL_TLS": "ConsumerMySQLTLS",
	"SLUICE_MYSQL_MAX_OPEN": "ConsumerMySQLMaxOpen", "SLUICE_MYSQL_MAX_IDLE": "ConsumerMySQLMaxIdle",
	"SLUICE_MYSQL_CONN_LIFETIME": "ConsumerMySQLConnLifetime", "SLUICE_MYSQL_AUTH": "ConsumerMySQLAuth",
	"SLUICE_MYSQL_USER": "ConsumerMySQLUser",
}

// allowed returns a parameter's AllowedValues (inline list) or nil.
func allowed(lines []string) []string {
	for _, l := range lines {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "AllowedValues:"); ok {
			var out []string
			for _, x := range strings.Split(strings.Trim(strings.TrimSpace(v), "[]"), ",") {
				out = append(out, strings.Trim(strings.TrimSpace(x), `"`))
			}
			return out
		}
	}
	return nil
}

// TestTemplateMySQLConnectionOnEveryPath: each MySQL setting reaches the
// SQS Lambda, the Kafka Lambda and the worker from its parameter, and
// every value the parameter admits is one the code accepts.
func TestTemplateMySQLConnectionOnEveryPath(t *testing.T) {
	text := template(t)
	sqsEnv := strings.Join(block(t, text, "Resources", "SqsConsumerFunction", "Properties", "Environment", "Variables"), "\n")
	kafkaEnv := strings.Join(block(t, text, "Resources", "KafkaConsumerFunction", "Properties", "Environment", "Variables"), "\n")
	worker := strings.Join(container(t), "\n")
	for env, param := range mysqlParams {
		if !strings.Contains(sqsEnv, env+": !Ref "+param+"\n") || !strings.Contains(kafkaEnv, env+": !Ref "+param+"\n") {
			t.Errorf("a consumer Lambda does not set %s from %s", env, param)
		}
		if !strings.Contains(worker, "{Name: "+env+", Value: !Ref "+param+"}") {
			t.Errorf("the worker does not set %s from %s", env, param)
		}
	}
	samples := map[string]map[string]bool{
		"ConsumerMySQLMaxOpen":      {"": true, "1": true, "8": true, "99": true, "0": false, "100": false, "-1": false},
		"ConsumerMySQLMaxIdle":      {"": true, "4": true, "0": false},
		"ConsumerMySQLConnLifetime": {"": true, "90s": true, "5m": true, "1h": true, "0s": false, "5 minutes": false, "5": false},
	}
	conn := map[string]string{"ConsumerMySQLMaxOpen": "SLUICE_MYSQL_MAX_OPEN", "ConsumerMySQLMaxIdle": "SLUICE_MYSQL_MAX_IDLE", "ConsumerMySQLConnLifetime": "SLUICE_MYSQL_CONN_LIFETIME"}
	for param, cases := range samples {
		re := regexp.MustCompile(value(t, block(t, text, "Parameters", param), "AllowedPattern"))
		for in, want := range cases {
			if re.MatchString(in) != want {
				t.Errorf("%s admits %q: %v; want %v", param, in, !want, want)
			}
			if _, err := mysqlsink.ConnFromEnv(func(k string) string { return map[string]string{conn[param]: in}[k] }, mysqlsink.LambdaConn()); want && err != nil {
				t.Errorf("%s admits %q, which the consumers refuse: %v", param, in, err)
			}
		}
	}
	modes := allowed(block(t, text, "Parameters", "ConsumerMySQLTLS"))
	if len(modes) < 2 {
		t.Fatalf("ConsumerMySQLTLS AllowedValues %q", modes)
	}
	for _, m := range modes {
		if _, err := mysqlsink.ConnFromEnv(func(k string) string { return map[string]string{"SLUICE_MYSQL_TLS": m}[k] }, mysqlsink.LambdaConn()); err != nil {
			t.Errorf("ConsumerMySQLTLS admits %q, which the consumers refuse: %v", m, err)
		}
	}
	if got := allowed(block(t, text, "Parameters", "ConsumerMySQLAuth")); strings.Join(got, ",") != "password,iam" {
		t.Errorf("ConsumerMySQLAuth AllowedValues %q; want password, iam", got)
	}
}

// TestTemplateIAMDatabaseAuth: with ConsumerMySQLAuth iam each consumer
// role may rds-db:connect as the user ConsumerMySQLDBUserArn names, and
// only then; the parameter takes RDS's dbuser ARNs (an instance, a cluster,
// a proxy) and nothing else.
func TestTemplateIAMDatabaseAuth(t *testing.T) {
	text := template(t)
	for _, role := range consumerRoles {
		policy := block(t, text, "Resources", role, "Properties", "Policies")
		st := strings.Join(statement(t, role, "ConnectAsDatabaseUser"), "\n")
		if !strings.Contains(st, "- rds-db:connect\n") || !strings.Contains(st, "Resource: !Ref ConsumerMySQLDBUserArn") {
			t.Errorf("%s ConnectAsDatabaseUser: %q", role, st)
		}
		for i, l := range policy {
			if strings.Contains(l, "Sid: ConnectAsDatabaseUser") && (i == 0 || strings.TrimSpace(policy[i-1]) != "- IsMySQLIAM") {
				t.Errorf("%s grants rds-db:connect outside the condition IsMySQLIAM", role)
			}
		}
	}
	cond := strings.Join(block(t, text, "Conditions", "IsMySQLIAM"), "\n")
	if !strings.Contains(cond, "!Equals [!Ref ConsumerMySQLAuth, iam]") {
		t.Errorf("IsMySQLIAM does not test ConsumerMySQLAuth: %q", cond)
	}
	re := regexp.MustCompile(value(t, block(t, text, "Parameters", "ConsumerMySQLDBUserArn"), "AllowedPattern"))
	for in, want := range map[string]bool{
		"": true,
		"arn:aws:rds-db:eu-west-1:123456789012:dbuser:db-ABCDEFGHIJKLMNOPQRSTU12345/sluice_rw":  true,
		"arn:aws:rds-db:eu-west-1:123456789012:dbuser:cluster-ABCDEFGHIJKLMNOPQRSTU1/sluice_rw": true,
		"arn:aws:rds-db:eu-west-1:123456789012:dbuser:prx-0123456789abcdef0/sluice_rw":          true,
		"sluice_rw": false, "arn:aws:rds:eu-west-1:123456789012:db:orders": false,
	} {
		if re.MatchString(in) != want {
			t.Errorf("ConsumerMySQLDBUserArn admits %q: %v; want %v", in, !want, want)
		}
	}
	rule := strings.Join(block(t, text, "Rules", "MySQLIAMNeedsUserAndTLS"), "\n")
	for _, p := range []string{"ConsumerMySQLDBUserArn", "ConsumerMySQLCA", "ConsumerMySQLTLS", "ConsumerMySQLUser", "ConsumerMySQLHost"} {
		if !strings.Contains(rule, p) {
			t.Errorf("the rule MySQLIAMNeedsUserAndTLS does not check %s", p)
		}
	}
}

// TestTemplateBoundsAndRetention: every numeric parameter has an upper
// bound; the consumers' queue keeps messages QueueRetentionPeriod seconds
// (14 days by default: the controller holds backlogs on purpose) and the
// dead-letter queues keep them SQS's most, so that a message redriven
// late still has its time there.
func TestTemplateBoundsAndRetention(t *testing.T) {
	text := template(t)
	params := block(t, text, "Parameters")
	for _, l := range params {
		if len(l)-len(strings.TrimLeft(l, " ")) != 2 || !strings.HasSuffix(l, ":") {
			continue
		}
		name := strings.TrimSuffix(strings.TrimSpace(l), ":")
		p := block(t, text, "Parameters", name)
		if value(t, p, "Type") == "Number" && !strings.Contains(strings.Join(p, "\n"), "MaxValue:") {
			t.Errorf("Number parameter %s has no MaxValue", name)
		}
	}
	p := block(t, text, "Parameters", "QueueRetentionPeriod")
	if value(t, p, "Default") != "1209600" || value(t, p, "MaxValue") != "1209600" {
		t.Errorf("QueueRetentionPeriod: default %s, max %s; want 14 days (1209600 s) for both", value(t, p, "Default"), value(t, p, "MaxValue"))
	}
	if got := value(t, block(t, text, "Resources", "ConsumerQueue", "Properties"), "MessageRetentionPeriod"); got != "!Ref QueueRetentionPeriod" {
		t.Errorf("ConsumerQueue MessageRetentionPeriod %q; want !Ref QueueRetentionPeriod", got)
	}
	for _, q := range []string{"ConsumerDeadLetterQueue", "KafkaConsumerDeadLetterQueue", "KafkaConsumerFailureQueue"} {
		if got, err := strconv.Atoi(value(t, block(t, text, "Resources", q, "Properties"), "MessageRetentionPeriod")); err != nil || got != 1209600 {
			t.Errorf("%s MessageRetentionPeriod %d (%v); want 1209600", q, got, err)
		}
	}
}

// TestTemplateScanSkipsSayWhy: every check the IaC scan (checkov) is told
// to skip carries its reason beside the resource.
func TestTemplateScanSkipsSayWhy(t *testing.T) {
	lines := strings.Split(template(t), "\n")
	n := 0
	for i, l := range lines {
		id, ok := strings.CutPrefix(strings.TrimSpace(l), "- id: ")
		if !ok {
			continue
		}
		n++
		if !regexp.MustCompile(`^CKV_AWS_[0-9]+$`).MatchString(id) {
			t.Errorf("line %d: skip id %q", i+1, id)
		}
		if i+2 >= len(lines) || strings.TrimSpace(lines[i+1]) != "comment: >-" || len(strings.TrimSpace(lines[i+2])) < 40 {
			t.Errorf("line %d: the skip of %s has no reason", i+1, id)
		}
	}
	if n == 0 {
		t.Fatal("no checkov skip found: the test reads the wrong lines")
	}
}

// TestTemplateHTTPAuthSecretOnEveryPath: the HTTP destination's
// Authorization header secret (SLUICE_HTTP_AUTH_SECRET, which every
// consumer path reads) is set from its parameter on the SQS Lambda, the
// Kafka Lambda and the worker, and each role may read that secret.
func TestTemplateHTTPAuthSecretOnEveryPath(t *testing.T) {
	const env = "SLUICE_HTTP_AUTH_SECRET"
	const ref = "!If [UsesHTTPAuthSecret, !Ref ConsumerHTTPAuthSecret, \"\"]"
	text := template(t)
	for _, fn := range []string{"SqsConsumerFunction", "KafkaConsumerFunction"} {
		vars := strings.Join(block(t, text, "Resources", fn, "Properties", "Environment", "Variables"), "\n")
		if !strings.Contains(vars, env+": "+ref+"\n") {
			t.Errorf("%s does not set %s from ConsumerHTTPAuthSecret", fn, env)
		}
	}
	if !strings.Contains(strings.Join(container(t), "\n"), "{Name: "+env+", Value: "+ref+"}") {
		t.Errorf("the worker does not set %s from ConsumerHTTPAuthSecret", env)
	}
	for _, role := range consumerRoles {
		st := strings.Join(statement(t, role, "ReadHTTPAuthSecret"), "\n")
		if !strings.Contains(st, "secretsmanager:GetSecretValue") || !strings.Contains(st, "${ConsumerHTTPAuthSecret}-??????") || !strings.Contains(st, "!Ref ConsumerHTTPAuthSecret") {
			t.Errorf("%s ReadHTTPAuthSecret does not allow GetSecretValue on the secret by name and ARN:\n%s", role, st)
		}
	}
}
