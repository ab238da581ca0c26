package testfile_test

import (
	"testing"

	"github.com/sluice-dev/sluice/internal/testfile"
)

func TestJSON(t *testing.T) {
	type event struct {
		Source string `json:"source"`
		N      int    `json:"n"`
	}
	if got := testfile.JSON[event](t, "testdata/event.json"); got != (event{Source: "aws.events", N: 3}) {
		t.Errorf("JSON = %+v; want source aws.events, n 3", got)
	}
	if got := string(testfile.Read(t, "testdata/event.json")); got != "{\"source\":\"aws.events\",\"n\":3}\n" {
		t.Errorf("Read = %q; want the file's content", got)
	}
}
