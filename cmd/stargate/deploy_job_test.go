package main

import (
	"io"
	"strconv"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/stargate-llm/stargate/study"
)

// TestDeployStudyJob: the sharded study runs as an Indexed Job whose every
// pod's arguments parse with the real command into a distinct part of N =
// completions, writes to a shared claim, and the merge Job reads where the
// parts are written.
func TestDeployStudyJob(t *testing.T) {
	m := loadManifests(t)
	var indexed, merge *batchv1.Job
	for _, j := range m.jobs {
		switch {
		case j.Spec.CompletionMode != nil && *j.Spec.CompletionMode == batchv1.IndexedCompletion:
			indexed = j
		case len(j.Spec.Template.Spec.Containers) == 1 && len(j.Spec.Template.Spec.Containers[0].Args) > 1 &&
			j.Spec.Template.Spec.Containers[0].Args[1] == "merge":
			merge = j
		}
	}
	if indexed == nil || merge == nil {
		t.Fatalf("want an Indexed Job and a merge Job, have %d jobs", len(m.jobs))
	}
	n := int(ptrOr(indexed.Spec.Completions, 1))
	if p := ptrOr(indexed.Spec.Parallelism, 1); p < 1 || int(p) > n {
		t.Errorf("parallelism %d, want 1-%d", p, n)
	}
	c := jobContainer(t, indexed)
	f := flags(c)
	if len(f["shard"]) != 1 || f["shard"][0] != "$(JOB_COMPLETION_INDEX)/"+strconv.Itoa(n) {
		t.Errorf("--shard=%v, want $(JOB_COMPLETION_INDEX)/%d (N must equal completions)", f["shard"], n)
	}
	var indexEnv bool
	for _, e := range c.Env {
		if e.Name == "JOB_COMPLETION_INDEX" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil &&
			e.ValueFrom.FieldRef.FieldPath == "metadata.annotations['batch.kubernetes.io/job-completion-index']" {
			indexEnv = true
		}
	}
	if !indexEnv {
		t.Error("JOB_COMPLETION_INDEX is not in env from the job-completion-index annotation")
	}
	seen := map[study.Shard]bool{}
	for i := range n {
		args := make([]string, len(c.Args))
		for k, a := range c.Args {
			args[k] = strings.ReplaceAll(a, "$(JOB_COMPLETION_INDEX)", strconv.Itoa(i))
		}
		fl := parseDeployed(t, args)
		s, err := study.ParseShard(fl["shard"])
		if err != nil {
			t.Fatalf("pod %d: %v", i, err)
		}
		if s.Index != i || s.Count != n || seen[s] {
			t.Errorf("pod %d runs part %v", i, s)
		}
		seen[s] = true
	}
	out := parseDeployed(t, c.Args)["out"]
	claim := checkClaimMount(t, m, indexed, c, out)

	mc := jobContainer(t, merge)
	fl := parseDeployed(t, mc.Args)
	if len(mc.Args) < 3 || mc.Args[2] != out {
		t.Errorf("merge reads %v, want the parts' directory %s", mc.Args, out)
	}
	if fl["out"] == "" {
		t.Error("merge has no --out")
	}
	if got := checkClaimMount(t, m, merge, mc, out); got != claim {
		t.Errorf("merge mounts claim %q, the parts are on %q", got, claim)
	}
	if merge.Spec.Suspend == nil || !*merge.Spec.Suspend {
		t.Error("the merge Job must be created suspended: it may start only once every part is written")
	}
}

func jobContainer(t *testing.T, j *batchv1.Job) corev1.Container {
	t.Helper()
	if j.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever && j.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyOnFailure {
		t.Errorf("job %s: restartPolicy %q", j.Name, j.Spec.Template.Spec.RestartPolicy)
	}
	cs := j.Spec.Template.Spec.Containers
	if len(cs) != 1 || !isStargate(cs[0]) {
		t.Fatalf("job %s: want one stargate container", j.Name)
	}
	if cs[0].Resources.Requests.Cpu().IsZero() || cs[0].Resources.Requests.Memory().IsZero() {
		t.Errorf("job %s: no cpu and memory requests", j.Name)
	}
	return cs[0]
}

// parseDeployed parses args with the real command and returns its string
// flags' values.
func parseDeployed(t *testing.T, args []string) map[string]string {
	t.Helper()
	root := newRoot(io.Discard, io.Discard)
	cmd, rest, err := root.Find(args)
	if err != nil || cmd == root {
		t.Fatalf("stargate %s: no such command (%v)", strings.Join(args, " "), err)
	}
	if err := cmd.ParseFlags(rest); err != nil {
		t.Fatalf("stargate %s: %v", strings.Join(args, " "), err)
	}
	if err := cmd.ValidateArgs(cmd.Flags().Args()); err != nil {
		t.Fatalf("stargate %s: %v", strings.Join(args, " "), err)
	}
	out := map[string]string{}
	for _, name := range []string{"shard", "out"} {
		if v, err := cmd.Flags().GetString(name); err == nil {
			out[name] = v
		}
	}
	return out
}

// checkClaimMount checks that path lies on a volume of the job backed by a
// claim in the manifests that many pods may write, and returns the claim.
func checkClaimMount(t *testing.T, m *manifests, j *batchv1.Job, c corev1.Container, path string) string {
	t.Helper()
	for _, vm := range c.VolumeMounts {
		if path != vm.MountPath && !strings.HasPrefix(path, strings.TrimSuffix(vm.MountPath, "/")+"/") {
			continue
		}
		for _, v := range j.Spec.Template.Spec.Volumes {
			if v.Name != vm.Name || v.PersistentVolumeClaim == nil {
				continue
			}
			pvc := m.claims[v.PersistentVolumeClaim.ClaimName]
			if pvc == nil {
				t.Fatalf("job %s: claim %q is not in the manifests", j.Name, v.PersistentVolumeClaim.ClaimName)
			}
			rwx := false
			for _, mode := range pvc.Spec.AccessModes {
				rwx = rwx || mode == corev1.ReadWriteMany
			}
			if !rwx {
				t.Errorf("claim %s is not ReadWriteMany; the parts are written by several pods at once", pvc.Name)
			}
			return pvc.Name
		}
	}
	t.Fatalf("job %s: %s is on no mounted claim", j.Name, path)
	return ""
}
