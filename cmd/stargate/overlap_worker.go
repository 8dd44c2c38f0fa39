package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/stargate-llm/stargate/study"
)

// runWorkerStudy is stargate study overlap --workload worker.
func runWorkerStudy(cmd *cobra.Command, clients, slots []int, seeds int, warmup, measure time.Duration, out string) error {
	if len(clients) == 0 {
		clients = study.WorkerClients
	}
	if len(slots) == 0 {
		slots = study.WorkerSlots
	}
	if seeds == 0 {
		seeds = 3
	}
	if !cmd.Flags().Changed("warmup") {
		warmup = 5 * time.Second
	}
	if !cmd.Flags().Changed("measure") {
		measure = 30 * time.Second
	}
	cells, err := study.WorkerStudy(study.DefaultWorkerParams(), clients, slots, seeds, warmup, measure)
	if errors.Is(err, study.ErrBadWorkerRun) {
		return usageError{err}
	}
	if err != nil {
		return failure{err}
	}
	if err := study.WorkerTable(cells).WriteText(cmd.OutOrStdout()); err != nil {
		return failure{err}
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return failure{fmt.Errorf("creating --out: %w", err)}
	}
	data, err := json.MarshalIndent(struct {
		Params study.WorkerParams `json:"params"`
		Cells  []study.WorkerCell `json:"cells"`
	}{study.DefaultWorkerParams(), cells}, "", "  ")
	if err != nil {
		return failure{err}
	}
	path := filepath.Join(out, "worker.json")
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return failure{fmt.Errorf("writing %s: %w", path, err)}
	}
	fmt.Fprintf(cmd.OutOrStdout(), "\nwrote %s\n", path)
	return nil
}
