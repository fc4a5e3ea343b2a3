package main

import (
	"bufio"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
)

// hasCPUQuota reports whether the process's cgroup, or one above it,
// limits its CPU time (cgroup v2 cpu.max, or v1 cpu.cfs_quota_us), read
// under root ("" for the machine's own /proc and /sys). In a container
// with a quota, Go's runtime already sets GOMAXPROCS from the quota and
// follows it as it changes; raising GOMAXPROCS would run more threads
// than the quota pays for (each burst of them throttled for the rest of
// the period) and turn those updates off.
func hasCPUQuota(root string) bool {
	mounts := cgroupMounts(root)
	f, err := os.Open(root + "/proc/self/cgroup")
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// hierarchy-ID:controllers:path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		var m cgroupMount
		var ok bool
		if parts[0] == "0" && parts[1] == "" {
			m, ok = mounts["cgroup2"]
		} else if slices.Contains(strings.Split(parts[1], ","), "cpu") {
			m, ok = mounts["cpu"]
		}
		if !ok {
			continue
		}
		rel, ok := strings.CutPrefix(parts[2], m.root)
		if !ok {
			continue // a cgroup outside the mount (another namespace's view)
		}
		for dir := path.Join("/", rel); ; dir = path.Dir(dir) {
			if m.v2 && quotaV2(root+m.dir+dir) || !m.v2 && quotaV1(root+m.dir+dir) {
				return true
			}
			if dir == "/" {
				break
			}
		}
	}
	return false
}

// cgroupMount is where a cgroup hierarchy is mounted: dir, showing the
// hierarchy's root path root.
type cgroupMount struct {
	dir, root string
	v2        bool
}

// cgroupMounts returns the cgroup v2 mount (key "cgroup2") and the v1
// mount of the cpu controller (key "cpu") from /proc/self/mountinfo.
func cgroupMounts(root string) map[string]cgroupMount {
	out := make(map[string]cgroupMount)
	b, err := os.ReadFile(root + "/proc/self/mountinfo")
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(b), "\n") {
		// id parent major:minor root mountpoint options... - fstype source superoptions
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 3 {
			continue
		}
		m := cgroupMount{dir: f[4], root: f[3]}
		switch {
		case g[0] == "cgroup2":
			m.v2 = true
			if _, seen := out["cgroup2"]; !seen {
				out["cgroup2"] = m
			}
		case g[0] == "cgroup" && slices.Contains(strings.Split(g[2], ","), "cpu"):
			if _, seen := out["cpu"]; !seen {
				out["cpu"] = m
			}
		}
	}
	return out
}

// quotaV2 reports whether dir's cpu.max sets a quota ("200000 100000",
// not "max 100000").
func quotaV2(dir string) bool {
	b, err := os.ReadFile(dir + "/cpu.max")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return false
	}
	n, err := strconv.ParseInt(f[0], 10, 64)
	return err == nil && n > 0
}

// quotaV1 reports whether dir's cpu.cfs_quota_us sets a quota (not -1).
func quotaV1(dir string) bool {
	b, err := os.ReadFile(dir + "/cpu.cfs_quota_us")
	if err != nil {
		return false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return err == nil && n > 0
}
