package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestHasCPUQuota: cgroup v2 and v1 trees written by the test, with the
// quota on the process's own cgroup, on a parent, or nowhere.
func TestHasCPUQuota(t *testing.T) {
	const v2mounts = "25 1 0:22 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"
	const v1mounts = "31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n" +
		"32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n" +
		"35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
	for _, tc := range []struct {
		name   string
		mounts string
		cgroup string
		files  map[string]string
		want   bool
	}{
		{"v2, no quota", v2mounts, "0::/app\n", map[string]string{"sys/fs/cgroup/app/cpu.max": "max 100000\n"}, false},
		{"v2, quota", v2mounts, "0::/app\n", map[string]string{"sys/fs/cgroup/app/cpu.max": "150000 100000\n"}, true},
		{"v2, quota on a parent", v2mounts, "0::/kube/pod/app\n", map[string]string{
			"sys/fs/cgroup/kube/pod/app/cpu.max": "max 100000\n", "sys/fs/cgroup/kube/cpu.max": "200000 100000\n"}, true},
		{"v2, no cpu controller files", v2mounts, "0::/app\n", map[string]string{"sys/fs/cgroup/app/cgroup.procs": ""}, false},
		{"v2 in a namespace (root /)", v2mounts, "0::/\n", map[string]string{"sys/fs/cgroup/cpu.max": "100000 100000\n"}, true},
		{"v1, no quota", v1mounts, "4:memory:/x\n2:cpu,cpuacct:/docker/abc\n", map[string]string{
			"sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "-1\n"}, false},
		{"v1, quota", v1mounts, "4:memory:/x\n2:cpu,cpuacct:/docker/abc\n", map[string]string{
			"sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "50000\n"}, true},
		{"v1, memory limit only", v1mounts, "4:memory:/x\n2:cpu,cpuacct:/\n", map[string]string{
			"sys/fs/cgroup/memory/x/cpu.cfs_quota_us": "50000\n", "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "-1\n"}, false},
		{"no cgroup files", "", "", nil, false},
		{"garbage", "x - y\n", "nonsense\n0::\n", map[string]string{"sys/fs/cgroup/cpu.max": "1 1"}, false},
		{"v2, unreadable cpu.max", v2mounts, "0::/app\n", map[string]string{"sys/fs/cgroup/app/cpu.max": "junk 100000\n"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			files := map[string]string{"proc/self/mountinfo": tc.mounts, "proc/self/cgroup": tc.cgroup}
			for k, v := range tc.files {
				files[k] = v
			}
			for p, body := range files {
				if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(root, p), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if got := hasCPUQuota(root); got != tc.want {
				t.Errorf("hasCPUQuota: got %v, want %v", got, tc.want)
			}
		})
	}
}
