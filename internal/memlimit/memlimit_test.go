package memlimit

import (
	"os"
	"testing"
	"testing/fstest"
)

const (
	mountinfoV2 = "29 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n"
	// A hybrid system: v1 controllers, memory among them, and the unified
	// hierarchy beside them.
	mountinfoHybrid = "30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n" +
		"31 30 0:28 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n" +
		"34 30 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n" +
		"40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
	unlimitedV1 = "9223372036854771712\n"
)

func TestFromCgroup(t *testing.T) {
	tests := map[string]struct {
		files map[string]string
		want  int64
		bad   bool
	}{
		"v2, the process's own cgroup": {
			files: map[string]string{
				"proc/self/cgroup":                          "0::/kubepods/pod1/c1\n",
				"proc/self/mountinfo":                       mountinfoV2,
				"sys/fs/cgroup/kubepods/pod1/c1/memory.max": "268435456\n",
			},
			want: 256 << 20,
		},
		"v2, a parent's limit is smaller": {
			files: map[string]string{
				"proc/self/cgroup":                          "0::/kubepods/pod1/c1\n",
				"proc/self/mountinfo":                       mountinfoV2,
				"sys/fs/cgroup/kubepods/pod1/c1/memory.max": "max\n",
				"sys/fs/cgroup/kubepods/pod1/memory.max":    "134217728\n",
				"sys/fs/cgroup/kubepods/memory.max":         "max\n",
			},
			want: 128 << 20,
		},
		"v2, memory.high below memory.max": {
			files: map[string]string{
				"proc/self/cgroup":              "0::/job\n",
				"proc/self/mountinfo":           mountinfoV2,
				"sys/fs/cgroup/job/memory.max":  "1073741824\n",
				"sys/fs/cgroup/job/memory.high": "536870912\n",
			},
			want: 512 << 20,
		},
		"v2, no limit anywhere": {
			files: map[string]string{
				"proc/self/cgroup":    "0::/user.slice/session-1.scope\n",
				"proc/self/mountinfo": mountinfoV2,
				"sys/fs/cgroup/user.slice/session-1.scope/memory.max": "max\n",
				"sys/fs/cgroup/user.slice/memory.max":                 "max\n",
			},
		},
		"v2 in a cgroup namespace: the process is at the root it sees": {
			files: map[string]string{
				"proc/self/cgroup":         "0::/\n",
				"proc/self/mountinfo":      mountinfoV2,
				"sys/fs/cgroup/memory.max": "104857600\n",
			},
			want: 100 << 20,
		},
		"v2, a path outside the namespace is read at the mount": {
			files: map[string]string{
				"proc/self/cgroup":         "0::/../../other\n",
				"proc/self/mountinfo":      mountinfoV2,
				"sys/fs/cgroup/memory.max": "104857600\n",
			},
			want: 100 << 20,
		},
		"v1 on a hybrid system, where the memory controller is": {
			files: map[string]string{
				"proc/self/cgroup":    "9:name=systemd:/\n4:memory:/process_api/abc\n1:cpu:/\n0::/\n",
				"proc/self/mountinfo": mountinfoHybrid,
				"sys/fs/cgroup/memory/process_api/abc/memory.limit_in_bytes": "314572800\n",
				"sys/fs/cgroup/memory/process_api/memory.limit_in_bytes":     unlimitedV1,
				"sys/fs/cgroup/memory/memory.limit_in_bytes":                 unlimitedV1,
				"sys/fs/cgroup/unified/memory.max":                           "1\n",
			},
			want: 300 << 20,
		},
		"v1, unlimited": {
			files: map[string]string{
				"proc/self/cgroup":    "4:memory:/process_api/abc\n0::/\n",
				"proc/self/mountinfo": mountinfoHybrid,
				"sys/fs/cgroup/memory/process_api/abc/memory.limit_in_bytes": unlimitedV1,
			},
		},
		"v1, the mount shows the hierarchy from the container's cgroup down": {
			files: map[string]string{
				"proc/self/cgroup":                           "5:memory,cpuset:/docker/abc\n",
				"proc/self/mountinfo":                        "34 30 0:31 /docker/abc /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory,cpuset\n",
				"sys/fs/cgroup/memory/memory.limit_in_bytes": "209715200\n",
			},
			want: 200 << 20,
		},
		"a mount point with a space": {
			files: map[string]string{
				"proc/self/cgroup":     "0::/j\n",
				"proc/self/mountinfo":  "29 23 0:26 / /cg\\040root rw - cgroup2 cgroup2 rw\n",
				"cg root/j/memory.max": "1048576\n",
			},
			want: 1 << 20,
		},
		"garbage in a limit file is no limit": {
			files: map[string]string{
				"proc/self/cgroup":            "0::/j\n",
				"proc/self/mountinfo":         mountinfoV2,
				"sys/fs/cgroup/j/memory.max":  "lots\n",
				"sys/fs/cgroup/j/memory.high": "-5\n",
			},
		},
		"no cgroup file system mounted": {
			files: map[string]string{
				"proc/self/cgroup":    "0::/j\n",
				"proc/self/mountinfo": "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n",
			},
		},
		"no cgroups at all": {
			files: map[string]string{},
		},
		"garbage lines are skipped": {
			files: map[string]string{
				"proc/self/cgroup":           "nonsense\n1\n0::/j\n",
				"proc/self/mountinfo":        "short line\nno separator at all here x y z\n" + mountinfoV2,
				"sys/fs/cgroup/j/memory.max": "2097152",
			},
			want: 2 << 20,
		},
		"cgroup file but no mountinfo": {
			files: map[string]string{"proc/self/cgroup": "0::/j\n"},
			bad:   true,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			fsys := fstest.MapFS{}
			for p, s := range tt.files {
				fsys[p] = &fstest.MapFile{Data: []byte(s)}
			}
			got, err := FromCgroup(fsys)
			if tt.bad {
				if err == nil {
					t.Fatalf("FromCgroup = %d, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("FromCgroup = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestApply(t *testing.T) {
	limited := fstest.MapFS{
		"proc/self/cgroup":           {Data: []byte("0::/j\n")},
		"proc/self/mountinfo":        {Data: []byte(mountinfoV2)},
		"sys/fs/cgroup/j/memory.max": {Data: []byte("1000000000\n")},
	}
	tests := map[string]struct {
		env  map[string]string
		fsys fstest.MapFS
		want Decision
	}{
		"a limit":         {fsys: limited, want: Decision{Cgroup: 1e9, Limit: 9e8}},
		"GOMEMLIMIT wins": {env: map[string]string{"GOMEMLIMIT": "off"}, fsys: limited, want: Decision{Why: "GOMEMLIMIT is set"}},
		"no limit":        {fsys: fstest.MapFS{}, want: Decision{Why: "the cgroup sets no memory limit"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			var set int64 = -1
			got := apply(func(k string) string { return tt.env[k] }, tt.fsys, func(n int64) int64 { set = n; return 0 })
			if got != tt.want {
				t.Fatalf("apply = %+v, want %+v", got, tt.want)
			}
			if want := tt.want.Limit; (want == 0 && set != -1) || (want != 0 && set != want) {
				t.Fatalf("set the limit to %d, want %d", set, want)
			}
		})
	}
}

// TestFromCgroupHere reads this machine's own files: whatever they say,
// they must say it without an error (a system without them has no limit).
func TestFromCgroupHere(t *testing.T) {
	if _, err := FromCgroup(os.DirFS("/")); err != nil {
		t.Fatal(err)
	}
}

func FuzzFromCgroup(f *testing.F) {
	f.Add("0::/a/b\n", mountinfoV2, "123\n")
	f.Add("4:memory:/x\n", mountinfoHybrid, unlimitedV1)
	f.Add("0::/../..\n", "1 2 3 /a/b /sys/fs/cgroup - cgroup2 c rw\n", "max")
	f.Fuzz(func(t *testing.T, cg, mi, limit string) {
		fsys := fstest.MapFS{
			"proc/self/cgroup":             {Data: []byte(cg)},
			"proc/self/mountinfo":          {Data: []byte(mi)},
			"sys/fs/cgroup/memory.max":     {Data: []byte(limit)},
			"sys/fs/cgroup/a/b/memory.max": {Data: []byte(limit)},
		}
		n, err := FromCgroup(fsys)
		if err == nil && n < 0 {
			t.Fatalf("negative limit %d", n)
		}
	})
}
