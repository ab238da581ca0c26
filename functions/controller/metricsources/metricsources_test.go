package metricsources

import (
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
)

func TestAllDefaultFirst(t *testing.T) {
	var names []string
	for _, s := range All() {
		names = append(names, s.Name())
	}
	if want := []string{"cloudwatch", "prometheus"}; !slices.Equal(names, want) {
		t.Errorf("All() names = %v; want %v (the default, CloudWatch, first)", names, want)
	}
}

func TestReadersFollowTheConfiguration(t *testing.T) {
	cfg := Config{AWS: aws.Config{Region: "us-east-1"}}
	for _, tc := range []struct {
		name, url string
		want      []string
	}{
		{"without a Prometheus URL", "", []string{"cloudwatch"}},
		{"with a Prometheus URL", "http://127.0.0.1:9090", []string{"cloudwatch", "prometheus"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg.PrometheusURL = tc.url
			readers, err := Readers(cfg)
			if err != nil {
				t.Fatalf("Readers: %v", err)
			}
			var got []string
			for name, r := range readers {
				if r == nil {
					t.Errorf("reader %q is nil", name)
				}
				got = append(got, name)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("Readers(PrometheusURL=%q) = %v; want %v", tc.url, got, tc.want)
			}
		})
	}
}

func TestReadersRefuseABadPrometheusURL(t *testing.T) {
	if _, err := Readers(Config{PrometheusURL: "://no-scheme"}); err == nil {
		t.Error("Readers(PrometheusURL=\"://no-scheme\") = nil error; want the URL refused")
	}
}
