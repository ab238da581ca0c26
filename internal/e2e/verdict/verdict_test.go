package verdict

import (
	"encoding/json"
	"testing"
	"time"
)

func TestOf(t *testing.T) {
	type line struct {
		Name string `json:"name"`
		Verdict
	}
	ok := line{Name: "a", Verdict: Of(time.Now(), nil)}
	b, _ := json.Marshal(ok)
	if got, want := string(b), `{"name":"a","seconds":0,"ok":true,"failures":[]}`; got != want {
		t.Errorf("passed run = %s; want %s (the verdict last, failures an empty list)", got, want)
	}
	if code := Print(ok, ok.Verdict); code != 0 {
		t.Errorf("Print of a passed run = %d; want 0", code)
	}
	failed := Of(time.Now().Add(-1500*time.Millisecond), []string{"tick missed"})
	if failed.OK || len(failed.Failures) != 1 || failed.Seconds != 1.5 {
		t.Errorf("failed run = %+v; want not OK, its failure, 1.5 s", failed)
	}
	if code := Print(line{Verdict: failed}, failed); code != 1 {
		t.Errorf("Print of a failed run = %d; want 1", code)
	}
}

// A result that cannot be encoded still ends in a JSON line: a failed
// verdict with the reason.
func TestLineOfUnencodableResult(t *testing.T) {
	var got struct {
		OK       bool     `json:"ok"`
		Failures []string `json:"failures"`
	}
	b := line(struct {
		Out json.RawMessage `json:"out"`
	}{json.RawMessage("{not json")})
	if err := json.Unmarshal(b, &got); err != nil || got.OK || len(got.Failures) != 1 {
		t.Fatalf("line = %s (%v); want a JSON line, not OK, with one failure", b, err)
	}
}
