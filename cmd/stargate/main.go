package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// usageError marks errors in what the user asked for; they exit with status 2,
// as do cobra's own errors (unknown command, bad flag).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// failure marks errors that happened while doing valid work (a run stopped,
// a file could not be written); they exit with status 1.
type failure struct{ err error }

func (e failure) Error() string { return e.err.Error() }
func (e failure) Unwrap() error { return e.err }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes the command line and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	finishRoot(root)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	fmt.Fprintf(stderr, "stargate: %v\n", err)
	var f failure
	if errors.As(err, &f) {
		return 1
	}
	return 2
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "stargate",
		Short:         "Route LLM inference across regions and mixed hardware, and simulate it first",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return usageError{fmt.Errorf("%w (see --help)", err)}
	})
	root.AddCommand(newSimCmd(), newStudyCmd(), newEngineCmd(), newGatewayCmd(), newRouterCmd(), newFleetCmd(), newDriveCmd(), newPlanCmd(), newAdminCmd(), newReportCmd())
	return root
}
