package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/kernodeck/kernodeck/config"
	"github.com/kernodeck/kernodeck/postgres"
)

// runWallet prints, per network, the derivation indexes handed out and the
// gap after the last one paid: the operator's wallet must scan at least that
// gap to see every payment.
func runWallet(ctx context.Context, cfg config.Config, stdout io.Writer) error {
	db, err := postgres.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer db.Close()
	uses, err := db.DerivationUses(ctx)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NETWORK\tNEXT INDEX\tLAST PAID INDEX\tGAP")
	for _, u := range uses {
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\n", u.Network, u.NextIndex, u.LastPaidIndex, u.Gap)
	}
	return w.Flush()
}
