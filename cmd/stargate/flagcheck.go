package main

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/stargate-llm/stargate/config"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/study"
	"github.com/stargate-llm/stargate/workload"
)

// The rules every command's flags follow, applied to the whole command tree
// once it is built (finishCommands), so that a command added later gets them
// without code of its own:
//
//   - every flag is checked before any work starts: a bad value exits with
//     status 2 and one line naming the flag and what it accepts;
//   - a flag whose help starts with liveOnlyPrefix only means something with
//     --live, and is refused without it rather than silently ignored;
//   - flags named policy, fleet or class(es) take registered names (policies,
//     built-in fleets or files, workload classes), checked and completed by
//     the shell from the registries;
//   - --out is a directory that must be writable before the work starts;
//   - one name per concept: a list of policies is --policy, a list of seeds
//     --seed (the plan commands still say --seeds), a number of seeds
//     --replicates; the other spellings stay as hidden, deprecated aliases
//     (flagAliases).

// liveOnlyPrefix starts the help of a flag that only applies with --live.
const liveOnlyPrefix = "live: "

// flagAliases are the deprecated spellings of a command's flags, by command
// path: alias -> canonical name.
var flagAliases = map[string]map[string]string{
	"stargate study slo-matrix": {"policies": "policy"},
	"stargate study overlap":    {"seeds": "replicates"},
	// The plan commands keep --seeds (a list) for now: their tests and
	// docs use it throughout; renaming it to --seed is the planner's
	// change. compare-routers keeps --policies: its --policy is the policy
	// inside a pool, --policies the ones compared.
}

// finishCommands applies the rules above to cmd and every command below it.
func finishCommands(cmd *cobra.Command) {
	for alias, canonical := range flagAliases[cmd.CommandPath()] {
		addFlagAlias(cmd, alias, canonical)
	}
	registerCompletions(cmd)
	if run := cmd.RunE; run != nil {
		cmd.RunE = func(c *cobra.Command, args []string) error {
			if err := checkFlags(c); err != nil {
				return err
			}
			return run(c, args)
		}
	}
	for _, sub := range cmd.Commands() {
		finishCommands(sub)
	}
}

// aliasValue is a deprecated spelling of another flag: setting it sets that
// flag (which then counts as changed).
type aliasValue struct {
	fs     *pflag.FlagSet
	target *pflag.Flag
}

func (a aliasValue) String() string     { return a.target.Value.String() }
func (a aliasValue) Type() string       { return a.target.Value.Type() }
func (a aliasValue) Set(v string) error { return a.fs.Set(a.target.Name, v) }

func addFlagAlias(cmd *cobra.Command, alias, canonical string) {
	fs := cmd.Flags()
	target := fs.Lookup(canonical)
	if target == nil || fs.Lookup(alias) != nil {
		return
	}
	fs.Var(aliasValue{fs: fs, target: target}, alias, "deprecated spelling of --"+canonical)
	fs.Lookup(alias).Hidden = true
}

// checkFlags checks every flag of cmd before its work starts.
func checkFlags(cmd *cobra.Command) error {
	fs := cmd.Flags()
	for alias, canonical := range flagAliases[cmd.CommandPath()] {
		if fs.Changed(alias) {
			fmt.Fprintf(cmd.ErrOrStderr(), "stargate: --%s is deprecated; use --%s\n", alias, canonical)
		}
	}
	if live := fs.Lookup("live"); live != nil && live.Value.String() != "true" {
		var errs []string
		fs.Visit(func(f *pflag.Flag) {
			if strings.HasPrefix(f.Usage, liveOnlyPrefix) {
				errs = append(errs, "--"+f.Name)
			}
		})
		switch len(errs) {
		case 0:
		case 1:
			return usagef("%s only applies with --live: add --live or drop it (see --help)", errs[0])
		default:
			return usagef("%s only apply with --live: add --live or drop them (see --help)", strings.Join(errs, ", "))
		}
	}
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		if err == nil {
			err = checkFlag(cmd, f)
		}
	})
	return err
}

// checkFlag checks one flag's value by what its name means.
func checkFlag(cmd *cobra.Command, f *pflag.Flag) error {
	switch f.Name {
	case "policy":
		names := policyNames(cmd)
		for _, v := range flagValues(f) {
			if !slices.Contains(names, v) {
				return usagef("--policy: unknown policy %q; want one of %s", v, strings.Join(names, ", "))
			}
		}
	case "fleet":
		for _, v := range flagValues(f) {
			if slices.Contains(config.PresetNames(), v) {
				continue
			}
			if st, err := os.Stat(v); err != nil || st.IsDir() {
				return usagef("--fleet %q: neither a built-in fleet (%s) nor a fleet file", v, strings.Join(config.PresetNames(), ", "))
			}
		}
	case "class", "classes":
		for _, v := range flagValues(f) {
			if _, err := workload.ClassByName(v); err != nil {
				return usagef("--%s: unknown class %q; want one of %s", f.Name, v, strings.Join(workload.ClassNames(), ", "))
			}
		}
	case "out":
		if dir := f.Value.String(); dir != "" {
			if err := checkWritableDir(dir); err != nil {
				return usagef("--out %q: %v; give a directory this user can write", dir, err)
			}
		}
	}
	return nil
}

// policyNames are the policies cmd accepts: the resilience study adds its
// pressure-no-net arm to the registry's.
func policyNames(cmd *cobra.Command) []string {
	if cmd.Name() == "resilience" {
		return study.ResilienceRegistry().Names()
	}
	return policy.NewRegistry().Names()
}

// flagValues returns a flag's values: a slice flag's elements or a
// comma-separated string's items, without empty ones.
func flagValues(f *pflag.Flag) []string {
	var raw []string
	if s, ok := f.Value.(pflag.SliceValue); ok {
		raw = s.GetSlice()
	} else {
		raw = strings.Split(f.Value.String(), ",")
	}
	var out []string
	for _, v := range raw {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// checkWritableDir makes dir if it is missing and checks that a file can be
// created in it.
func checkWritableDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			return pe.Err
		}
		return err
	}
	f, err := os.CreateTemp(dir, ".stargate-write-check-*")
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			return pe.Err
		}
		return err
	}
	name := f.Name()
	_ = f.Close()
	return os.Remove(name)
}

// registerCompletions completes policy, fleet and class names in the shell.
// Lists are comma separated, so the completion continues after the last comma.
func registerCompletions(cmd *cobra.Command) {
	complete := func(flag string, names func() []string, files bool) {
		if cmd.Flags().Lookup(flag) == nil {
			return
		}
		_ = cmd.RegisterFlagCompletionFunc(flag, func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			prefix := ""
			if i := strings.LastIndex(toComplete, ","); i >= 0 {
				prefix = toComplete[:i+1]
			}
			var out []cobra.Completion
			for _, n := range names() {
				out = append(out, prefix+n)
			}
			if files {
				return out, cobra.ShellCompDirectiveDefault
			}
			return out, cobra.ShellCompDirectiveNoFileComp
		})
	}
	complete("policy", func() []string { return policyNames(cmd) }, false)
	complete("policies", func() []string { return policyNames(cmd) }, false)
	complete("fleet", config.PresetNames, true)
	complete("class", workload.ClassNames, false)
	complete("classes", workload.ClassNames, false)
}

// versionString is the binary's version from its build information: the
// module version (or "(devel)"), the VCS revision and time when the build
// recorded them, and the Go version.
func versionString() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown (no build information)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, at, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = ", modified"
			}
		}
	}
	if rev != "" {
		v += fmt.Sprintf(" (commit %.12s, %s%s)", rev, at, dirty)
	}
	return v + " " + bi.GoVersion
}

// finishRoot gives root a --version flag and applies the flag rules to
// every command (finishCommands).
func finishRoot(root *cobra.Command) {
	root.Version = versionString()
	root.SetVersionTemplate("stargate {{.Version}}\n")
	finishCommands(root)
}
