// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package packaging

import (
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const (
	pkgName  = "hermeskilld"
	stateDir = "/var/lib/hermeskill" // kept by purge when it holds records
	runDir   = "/run/hermeskill"
)

// groups are those that the sample config names and sysusers.d makes.
var groups = []string{"hermeskill", "hermeskill-ops"}

// TestDebInstall builds the package with make deb, installs it into this
// machine with dpkg, checks the installed unit (systemd-analyze verify),
// config (check-config) and binary (supervise of an example agent), then
// removes and purges it and checks that nothing is left but what
// docs/operations.md says purge keeps: the records in /var/lib/hermeskill
// and the groups. Whatever happens, it then puts the machine back as it
// found it: purge, the records it made, the groups it made.
func TestDebInstall(t *testing.T) {
	if os.Getenv("HK_TEST_INSTALL") != "1" {
		t.Skip("installs a package into this machine: make test-install runs it (HK_TEST_INSTALL=1)")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: dpkg -i installs into this machine")
	}
	dpkg := lookPath(t, "dpkg", "dpkg")
	dpkgDeb := lookPath(t, "dpkg-deb", "dpkg")
	analyze := lookPath(t, "systemd-analyze", "systemd")
	makeTool := lookPath(t, "make", "make")
	lookPath(t, "git", "git") // make deb's versions
	groupdel := lookPath(t, "groupdel", "passwd")
	if s := status(); s != "" {
		t.Skipf("dpkg knows a %s package here (%s): the test would replace it", pkgName, s)
	}
	for _, p := range []string{"/usr/bin/hermeskilld", "/etc/hermeskill"} {
		if exists(p) {
			t.Skipf("%s exists (make install?): the test would overwrite it", p)
		}
	}

	// Build, and check the package as the release check does.
	dist := t.TempDir()
	o := run(t, 10*time.Minute, repoRoot(t), nil, makeTool, "--no-print-directory", "deb", "DIST="+dist)
	require.Zero(t, o.code, "make deb")
	debs, err := filepath.Glob(filepath.Join(dist, pkgName+"_*.deb"))
	require.NoError(t, err)
	require.Len(t, debs, 1, "make deb made one package in %s", dist)
	deb := debs[0]
	o = run(t, time.Minute, "/", nil, dpkgDeb, "--contents", deb)
	require.Zero(t, o.code)
	files := listing(o.stdout)
	for _, want := range []string{
		"/usr/bin/hermeskilld",
		"/usr/lib/systemd/system/hermeskilld.service",
		"/usr/lib/sysusers.d/hermeskilld.conf",
		"/usr/lib/tmpfiles.d/hermeskilld.conf",
		"/etc/hermeskill/hermeskilld.yaml",
		"/etc/hermeskill/agents.d",
		"/usr/share/man/man1/hermeskilld.1.gz",
		"/usr/share/man/man1/hermeskilld-supervise.1.gz",
		"/usr/share/bash-completion/completions/hermeskilld",
		"/usr/share/zsh/vendor-completions/_hermeskilld",
		"/usr/share/fish/vendor_completions.d/hermeskilld.fish",
		"/usr/share/doc/hermeskilld/copyright",
		"/usr/share/doc/hermeskilld/README.md",
		"/usr/share/doc/hermeskilld/examples/config/prices.yaml",
	} {
		require.Contains(t, files, want)
	}
	docs := requireDocs(t, files)
	o = run(t, time.Minute, "/", nil, dpkgDeb, "--info", deb, "conffiles")
	require.Zero(t, o.code)
	require.Equal(t, "/etc/hermeskill/hermeskilld.yaml\n", o.stdout)

	// What the machine was, and the promise to restore it.
	before := snapshot(files)
	hadGroup := map[string]bool{}
	for _, g := range groups {
		hadGroup[g] = groupExists(g)
	}
	hadState := exists(stateDir)
	var runMode fs.FileMode // 0: there was no runtime directory
	if fi, err := os.Stat(runDir); err == nil {
		runMode = fi.Mode().Perm()
	}
	// What a root supervise makes in it, which purge must not leave.
	runDirs := []string{runDir + "/supervise", runDir + "/supervise-as-user", runDir}
	hadRunDir := map[string]fs.FileMode{} // their modes; absent: not there
	for _, d := range runDirs {
		if fi, err := os.Lstat(d); err == nil && fi.IsDir() {
			hadRunDir[d] = fi.Mode().Perm()
		}
	}
	var records []string
	t.Cleanup(func() {
		restore(t, dpkg, groupdel, hadGroup, hadState, runMode, records)
		// Purge removes the empty directories root runs of supervise left
		// in the runtime directory: those that were there before, back.
		for _, d := range runDirs[:2] {
			if mode, ok := hadRunDir[d]; ok && !exists(d) && exists(runDir) {
				if err := os.Mkdir(d, mode); err != nil {
					t.Errorf("restore: %v", err)
				}
			}
		}
	})

	// Install.
	o = run(t, 2*time.Minute, "/", nil, dpkg, "--install", deb)
	require.Zero(t, o.code, "dpkg -i")
	require.Equal(t, "install ok installed", status())
	for _, g := range groups {
		require.True(t, groupExists(g), "group %s", g)
	}
	// Not the runtime directory's mode: a root supervise (another test's)
	// may have made it private by now.
	require.DirExists(t, runDir)
	requireDir(t, stateDir, 0o750)
	requireInstalledDocs(t, docs)
	if systemctl, err := exec.LookPath("systemctl"); err == nil {
		o = run(t, time.Minute, "/", nil, systemctl, "is-enabled", "hermeskilld.service")
		require.Equal(t, "disabled\n", o.stdout, "installed neither enabled nor started")
	}

	// The unit, the config and the binary as installed.
	o = run(t, time.Minute, "/", nil, analyze, "verify", "/usr/lib/systemd/system/hermeskilld.service")
	require.Zero(t, o.code, "systemd-analyze verify")
	o = run(t, time.Minute, "/", nil, "/usr/bin/hermeskilld", "check-config", "/etc/hermeskill/hermeskilld.yaml")
	require.Zero(t, o.code, "check-config")
	// Nothing to create: the package ships agents_dir.
	require.Equal(t, "/etc/hermeskill/hermeskilld.yaml: valid daemon file\n", o.stdout)
	o = run(t, time.Minute, "/", nil, "/usr/bin/hermeskilld", "version")
	require.Zero(t, o.code)
	require.Regexp(t, `^hermeskilld \S+\n$`, o.stdout)
	require.NotContains(t, o.stdout, "devel", "make deb sets the version")
	if bash, err := exec.LookPath("bash"); err == nil {
		o = run(t, time.Minute, "/", nil, bash, "-c", ". /usr/share/bash-completion/completions/hermeskilld && complete -p hermeskilld")
		require.Zero(t, o.code, "the bash completion loads")
	}
	agent := filepath.Join(t.TempDir(), "goagent")
	staticBuild(t, "examples/agents/goagent", agent)
	o = run(t, time.Minute, "/", nil, "/usr/bin/hermeskilld", "supervise", "--id", "hk-deb-test",
		"--tool-loop", "5", "--", agent, "-loop", "-delay", "10ms")
	require.Equal(t, 124, o.code, "an automatic kill that the agent answered with 0")
	m := regexp.MustCompile(`certificate: (/\S+\.json)\n`).FindStringSubmatch(o.stderr)
	require.NotNil(t, m, "no certificate in the summary line")
	records = append(records, m[1])
	require.True(t, strings.HasPrefix(m[1], stateDir+"/certs/"), "root's default certs dir")
	require.FileExists(t, m[1])

	// Remove: the conffile stays.
	o = run(t, 2*time.Minute, "/", nil, dpkg, "--remove", pkgName)
	require.Zero(t, o.code, "dpkg -r")
	require.Equal(t, "deinstall ok config-files", status())
	require.NoFileExists(t, "/usr/bin/hermeskilld")
	require.NoFileExists(t, "/usr/lib/systemd/system/hermeskilld.service")
	require.FileExists(t, "/etc/hermeskill/hermeskilld.yaml")

	// Purge: only the documented state is left.
	o = run(t, 2*time.Minute, "/", nil, dpkg, "--purge", pkgName)
	require.Zero(t, o.code, "dpkg -P")
	require.Empty(t, status(), "dpkg still knows the package")
	after := snapshot(files)
	var added, removed []string
	for p := range after {
		if !before[p] && p != stateDir && !strings.HasPrefix(p, stateDir+"/") {
			added = append(added, p)
		}
	}
	for p := range before {
		if !after[p] {
			removed = append(removed, p)
		}
	}
	slices.Sort(added)
	slices.Sort(removed)
	require.Empty(t, added, "left behind by purge")
	require.Empty(t, removed, "removed, yet there before the install")
	require.FileExists(t, records[0], "purge keeps the certificates")
	for _, g := range groups {
		require.True(t, groupExists(g), "purge keeps group %s", g)
	}
	// The supervise run above left /run/hermeskill/supervise, empty. Other
	// root runs (another test's) may be using these directories now: a
	// directory that holds something but directories is theirs to keep.
	for _, d := range runDirs {
		if _, had := hadRunDir[d]; had || !exists(d) {
			continue
		}
		if held(d) {
			t.Logf("%s is in use by a concurrent root supervise: left, as it should be", d)
			continue
		}
		require.NoDirExists(t, d, "purge removes the runtime directory and what root runs of supervise left empty in it")
	}
	left, err := filepath.Glob("/var/lib/dpkg/info/" + pkgName + ".*")
	require.NoError(t, err)
	require.Empty(t, left)
}

// restore puts the machine back as the test found it: the package purged,
// the records and directories it made removed, the groups it made deleted.
// It goes on past a failure, reporting each.
func restore(t *testing.T, dpkg, groupdel string, hadGroup map[string]bool, hadState bool, runMode fs.FileMode, records []string) {
	do := func(argv ...string) {
		if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
			t.Errorf("restore: %s: %v\n%s", strings.Join(argv, " "), err, out)
		}
	}
	if status() != "" {
		do(dpkg, "--purge", pkgName)
	}
	if hadState {
		for _, r := range records {
			if err := os.Remove(r); err != nil && !os.IsNotExist(err) {
				t.Errorf("restore: %v", err)
			}
		}
	} else if err := os.RemoveAll(stateDir); err != nil {
		t.Errorf("restore: %v", err)
	}
	// The runtime directory: tmpfiles set its mode, purge removed it when
	// empty, even when it was there before (a root supervise makes it).
	if runMode == 0 {
		// When empty: a root supervise may be using it.
		os.Remove(runDir + "/supervise")
		os.Remove(runDir)
	} else {
		if err := os.MkdirAll(runDir, runMode); err != nil {
			t.Errorf("restore: %v", err)
		}
		if err := os.Chmod(runDir, runMode); err != nil {
			t.Errorf("restore: %v", err)
		}
	}
	for _, g := range groups {
		if !hadGroup[g] && groupExists(g) {
			do(groupdel, g)
		}
	}
}

// status is dpkg's status of the package ("install ok installed"), or ""
// when dpkg does not know it.
func status() string {
	out, err := exec.Command("dpkg-query", "--show", "--showformat=${Status}", pkgName).Output()
	if err != nil {
		return "" // "no packages found matching"
	}
	s := strings.TrimSpace(string(out))
	if s == "unknown ok not-installed" {
		return ""
	}
	return s
}

// listing is the package's paths from dpkg-deb --contents, absolute,
// without a trailing slash.
func listing(contents string) []string {
	var paths []string
	for line := range strings.Lines(contents) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		p := strings.TrimSuffix(strings.TrimPrefix(f[len(f)-1], "."), "/")
		if p != "" {
			paths = append(paths, p)
		}
	}
	return paths
}

// snapshot is the set of paths where the package and its scripts may
// leave something: every path under /etc and /var/lib (but dpkg's and
// apt's own records: dpkg-query answers for those), and the entries of
// every directory that the package has files in. Not all of /usr: walking
// it can take a minute on a cold cache. Backups of the user and group
// files, which systemd-sysusers and groupdel write, are left out.
func snapshot(pkgFiles []string) map[string]bool {
	m := map[string]bool{}
	skip := []string{"/var/lib/dpkg", "/var/lib/apt", "/etc/passwd-", "/etc/group-", "/etc/shadow-", "/etc/gshadow-", "/etc/.pwd.lock"}
	for _, root := range []string{"/etc", "/var/lib"} {
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if slices.Contains(skip, p) {
				if d != nil && d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if err == nil {
				m[p] = true
			}
			return nil
		})
	}
	for _, f := range pkgFiles {
		dir := filepath.Dir(f)
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		m[dir] = true
		for _, e := range entries {
			m[filepath.Join(dir, e.Name())] = true
		}
	}
	return m
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

func groupExists(name string) bool {
	_, err := user.LookupGroup(name)
	return err == nil
}

// requireDir: path is a directory with mode perm.
func requireDir(t *testing.T, path string, perm fs.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.True(t, fi.IsDir(), "%s is a directory", path)
	require.Equal(t, perm, fi.Mode().Perm(), "%s mode", path)
}

// held reports whether the directory tree at dir holds anything but
// directories (a socket, a file): what a running program put there.
func held(dir string) bool {
	found := false
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			found = true
			return filepath.SkipAll
		}
		return nil
	})
	return found
}
