package consumerenv

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/sluice-dev/sluice/internal/version"
)

// Configure is the start of a consumer's main: it returns the JSON logger on
// stderr, whose first line names the build (version, Go), and the
// configuration that load reads from the environment. A configuration load
// refuses is logged and exits with status 2.
func Configure[C any](load func(getenv func(string) string) (C, error)) (C, *slog.Logger) {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	log.Info("start", version.Attrs()...)
	cfg, err := load(os.Getenv)
	if err != nil {
		log.Error("configuration", "err", err)
		os.Exit(2)
	}
	return cfg, log
}

// Start is a consumer Lambda's main: Configure, then build wires the
// handler (a failure is logged and exits with status 1), and the Lambda
// runtime serves handle(h) until the environment is shut down; close
// releases what build opened.
func Start[C, H any](load func(getenv func(string) string) (C, error),
	build func(context.Context, C, *slog.Logger) (H, func(), error), handle func(H) any) {
	cfg, log := Configure(load)
	h, closeAll, err := build(context.Background(), cfg, log)
	if err != nil {
		log.Error("start", "err", err)
		os.Exit(1)
	}
	defer closeAll()
	lambda.Start(handle(h))
}
