package main

import (
	"os"
	"strconv"
	"strings"
)

// procCPU is the CPU time (user + system) a process has used so far, in
// seconds, from /proc/<pid>/stat; -1 if it cannot be read.
func procCPU(pid int) float64 {
	return statCPU("/proc/" + strconv.Itoa(pid) + "/stat")
}

// statCPU is the CPU time (user + system) in a process's or a thread's
// stat file, in seconds; -1 if it cannot be read.
func statCPU(path string) float64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	// The command name (field 2) may hold spaces; fields after it start
	// past the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state): utime is field 14, stime field 15.
	if len(f) < 13 {
		return -1
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / clockTicks
}

// jvmJITCPU is the CPU time, in seconds, a Java process's JIT compiler
// threads have used so far (HotSpot names them "C1 CompilerThreadN" and
// "C2 CompilerThreadN", which the kernel's 15-byte comm cuts to "C1
// CompilerThre"); 0 if there are none or they cannot be read. A thread
// that ended meanwhile takes its time with it: HotSpot ends compiler
// threads it no longer needs, so over a window this can only understate
// the compiling.
func jvmJITCPU(pid int) float64 {
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	t := 0.0
	for _, e := range tasks {
		comm, err := os.ReadFile(dir + e.Name() + "/comm")
		if err != nil || !jitThread(strings.TrimSpace(string(comm))) {
			continue
		}
		if c := statCPU(dir + e.Name() + "/stat"); c > 0 {
			t += c
		}
	}
	return t
}

// jitThread says whether a HotSpot thread of this name compiles code.
func jitThread(comm string) bool {
	return strings.HasPrefix(comm, "C1 CompilerThre") || strings.HasPrefix(comm, "C2 CompilerThre")
}

// clockTicks is USER_HZ, 100 on Linux/amd64.
const clockTicks = 100

// procMem returns a process's current and peak resident set size in bytes
// (VmRSS, VmHWM); 0 if unknown.
func procMem(pid int) (rss, peak int64) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		switch k {
		case "VmRSS":
			rss = n << 10
		case "VmHWM":
			peak = n << 10
		}
	}
	return rss, peak
}

// procChildren lists the direct children of pid.
func procChildren(pid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, c)
		}
	}
	return out
}

// machineCPU returns the busy and total jiffies of all CPUs from
// /proc/stat (busy excludes idle and iowait).
func machineCPU() (busy, total int64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0
	}
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		total += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy, total
}
