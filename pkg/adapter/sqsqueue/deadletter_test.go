package sqsqueue

import (
	"encoding/base64"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sluice-dev/sluice/pkg/consume"
)

// TestDeadLetterEntryBinary: a poison Kafka record with a binary value and
// binary headers becomes an entry SQS accepts: the body in base64 with the
// encoding named, binary header values as Binary attributes, names SQS
// refuses left out, the reason and id cleaned of what SQS refuses.
func TestDeadLetterEntryBinary(t *testing.T) {
	p := consume.Poison{Message: consume.Message{ID: "t/0/\x007", Body: []byte{0xff, 0x00, 'x'},
		Attributes: map[string]string{"trace": "\x76\xdc\x00\x7f\x80", "kafka.topic": "t", "bad name": "v", "AWS.x": "v"}},
		Reason: "malformed payload: \x00"}
	e := deadLetterEntry(3, p)
	if aws.ToString(e.MessageBody) != base64.StdEncoding.EncodeToString(p.Message.Body) || aws.ToString(e.MessageAttributes[BodyEncodingAttribute].StringValue) != "base64" {
		t.Errorf("body %q encoding %v; want base64 of the bytes, encoding base64", aws.ToString(e.MessageBody), e.MessageAttributes[BodyEncodingAttribute])
	}
	if a := e.MessageAttributes["trace"]; aws.ToString(a.DataType) != "Binary" || string(a.BinaryValue) != "\x76\xdc\x00\x7f\x80" {
		t.Errorf("trace = %+v; want Binary with the header's bytes", a)
	}
	if aws.ToString(e.MessageAttributes["kafka.topic"].StringValue) != "t" {
		t.Errorf("kafka.topic = %+v; want String t", e.MessageAttributes["kafka.topic"])
	}
	for _, k := range []string{"bad name", "AWS.x"} {
		if _, ok := e.MessageAttributes[k]; ok {
			t.Errorf("attribute %q kept; SQS refuses its name", k)
		}
	}
	if r := aws.ToString(e.MessageAttributes[ReasonAttribute].StringValue); !sqsText(r) || r != "malformed payload: \uFFFD" {
		t.Errorf("reason = %q; want the NUL replaced", r)
	}
	if id := aws.ToString(e.MessageAttributes[OriginalIDAttribute].StringValue); id != "t/0/\uFFFD7" {
		t.Errorf("original id = %q; want t/0/\uFFFD7", id)
	}
}

// TestDeadLetterEntryText: a text body goes as it is, without an encoding.
func TestDeadLetterEntryText(t *testing.T) {
	e := deadLetterEntry(0, consume.Poison{Message: consume.Message{ID: "m", Body: []byte("not json {")}, Reason: "r"})
	if aws.ToString(e.MessageBody) != "not json {" {
		t.Errorf("body = %q; want it unchanged", aws.ToString(e.MessageBody))
	}
	if _, ok := e.MessageAttributes[BodyEncodingAttribute]; ok {
		t.Errorf("text body marked as encoded")
	}
}
