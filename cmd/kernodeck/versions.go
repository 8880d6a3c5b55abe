package main

import (
	"context"
	"fmt"
	"io"

	"go.temporal.io/sdk/client"

	"github.com/kernodeck/kernodeck/config"
	"github.com/kernodeck/kernodeck/wfclient"
	"github.com/kernodeck/kernodeck/workflows"
)

// runVersions prints the open runs per workflow history version.
func runVersions(ctx context.Context, cfg config.Config, stdout io.Writer) error {
	opts, err := temporalConnection(&cfg)
	if err != nil {
		return err
	}
	if err := checkTemporalTransport(false, cfg.TemporalAllowPlaintext, opts); err != nil {
		return err
	}
	tc, err := client.DialContext(ctx, opts)
	if err != nil {
		return fmt.Errorf("temporal: %w", err)
	}
	defer tc.Close()
	counts, err := (&wfclient.Client{Temporal: tc}).OpenRunsByVersion(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "history version  open runs  (this build starts %d..%d)\n", workflows.OldestStartVersion, workflows.NewestVersion)
	for _, c := range counts {
		fmt.Fprintf(stdout, "%15d  %9d\n", c.Version, c.Open)
	}
	return nil
}
