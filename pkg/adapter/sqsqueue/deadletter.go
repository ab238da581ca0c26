package sqsqueue

import (
	"encoding/base64"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluice-dev/sluice/pkg/consume"
)

// BodyEncodingAttribute is set to "base64" on a dead letter whose original
// body is not text SQS accepts (binary Kafka values, invalid UTF-8): its
// body is then the original's bytes in standard base64.
const BodyEncodingAttribute = "sluice-body-encoding"

// deadLetterEntry is the SendMessageBatch entry of poison message p: its
// body (base64 when SQS would refuse it), up to 8 of its attributes, its
// reason and original id.
func deadLetterEntry(i int, p consume.Poison) types.SendMessageBatchRequestEntry {
	body, encoded := string(p.Message.Body), false
	if !sqsText(body) || body == "" {
		body, encoded = base64.StdEncoding.EncodeToString(p.Message.Body), true
	}
	keep := 8
	if encoded {
		keep = 7
	}
	attrs := deadLetterAttributes(p.Message.Attributes, keep)
	reason := p.Reason
	if len(reason) > 1024 {
		reason = reason[:1024]
	}
	attrs[ReasonAttribute] = stringAttr(sqsClean(reason))
	attrs[OriginalIDAttribute] = stringAttr(sqsClean(p.Message.ID))
	if encoded {
		attrs[BodyEncodingAttribute] = stringAttr("base64")
	}
	return types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(body), MessageAttributes: attrs}
}

// deadLetterAttributes copies up to keep original attributes (by name)
// whose names SQS accepts; a value SQS would refuse as text goes as Binary.
func deadLetterAttributes(orig map[string]string, keep int) map[string]types.MessageAttributeValue {
	names := make([]string, 0, len(orig))
	for k, v := range orig {
		if k != ReasonAttribute && k != OriginalIDAttribute && k != BodyEncodingAttribute && v != "" && sqsName(k) {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	out := make(map[string]types.MessageAttributeValue, min(len(names), keep)+3)
	for _, k := range names[:min(len(names), keep)] {
		if v := orig[k]; sqsText(v) {
			out[k] = stringAttr(v)
		} else {
			out[k] = types.MessageAttributeValue{DataType: aws.String("Binary"), BinaryValue: []byte(v)}
		}
	}
	return out
}

func stringAttr(v string) types.MessageAttributeValue {
	return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
}

// sqsRune reports whether SQS accepts r in a body or a string attribute
// (#x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF).
func sqsRune(r rune) bool {
	return r == 0x9 || r == 0xA || r == 0xD || (r >= 0x20 && r <= 0xD7FF) || (r >= 0xE000 && r <= 0xFFFD) || (r >= 0x10000 && r <= 0x10FFFF)
}

// sqsText reports whether SQS accepts s as a body or a string value.
func sqsText(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !sqsRune(r) {
			return false
		}
	}
	return true
}

// sqsClean replaces what SQS refuses in s with U+FFFD.
func sqsClean(s string) string {
	return strings.Map(func(r rune) rune {
		if sqsRune(r) {
			return r
		}
		return utf8.RuneError
	}, strings.ToValidUTF8(s, "\uFFFD"))
}

// sqsName reports whether SQS accepts k as an attribute name: up to 256
// letters, digits, '-', '_' and '.', no leading, trailing or double '.',
// not starting with "AWS." or "Amazon.".
func sqsName(k string) bool {
	if k == "" || len(k) > 256 || k[0] == '.' || k[len(k)-1] == '.' || strings.Contains(k, "..") {
		return false
	}
	lower := strings.ToLower(k)
	if strings.HasPrefix(lower, "aws.") || strings.HasPrefix(lower, "amazon.") {
		return false
	}
	for _, r := range k {
		if !(r == '-' || r == '_' || r == '.' || (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')) {
			return false
		}
	}
	return true
}
