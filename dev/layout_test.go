package dev

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"khook.io/core/testing/testenv"
)

const (
	coreTesting = "khook.io/core/testing/" // the helpers of core's own tests
	devModule   = "khook.io/dev"           // this module: the tooling
)

// TestLayout: the product, its tests' helpers and the tooling each in
// their place. The three entrypoints link nothing of core/testing nor of
// this module; every other package of core is one they link (a runtime
// helper of core/internal included), so core holds the product and, under
// core/testing, only helpers that core's own tests import (directly or
// through another helper); what only tooling needs lives in this module.
func TestLayout(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	linked := map[string]bool{}
	for _, p := range goList(t, root, "-deps", "./kubectl-khook", "./helm-khook", "./terraform-provider-khook") {
		linked[p] = true
		if strings.HasPrefix(p, coreTesting) || p == devModule || strings.HasPrefix(p, devModule+"/") {
			t.Errorf("an entrypoint links %s: test helpers (core/testing) and tooling (dev) must stay out of the binaries", p)
		}
	}

	// Every package of core with the tags of `make test`, with what it
	// and its tests import.
	// testsOnly: a folder of _test.go files alone (a step kind that exists
	// only in tests, core/steps/testkind) is a test of core, not a package:
	// nothing can link it, and what it imports is what core's tests use.
	type pkg struct {
		imports, testImports []string
		testsOnly            bool
	}
	core := map[string]pkg{}
	for _, line := range goList(t, root, "-tags", "integration libxml2", "-f",
		"{{.ImportPath}}|{{join .Imports \" \"}}|{{join .TestImports \" \"}} {{join .XTestImports \" \"}}|{{len .GoFiles}} {{len .CgoFiles}}", "./core/...") {
		f := strings.Split(line, "|")
		if len(f) != 4 {
			t.Fatalf("go list: unexpected line %q", line)
		}
		core[f[0]] = pkg{imports: strings.Fields(f[1]), testImports: strings.Fields(f[2]), testsOnly: f[3] == "0 0"}
	}
	if len(core) == 0 {
		t.Fatal("go list ./core/... listed no package")
	}

	// The helpers core's tests reach: imported by a test of a product
	// package, or by a helper so reached.
	used := map[string]bool{}
	var reach func(p string)
	reach = func(p string) {
		if !strings.HasPrefix(p, coreTesting) || used[p] {
			return
		}
		used[p] = true
		for _, q := range core[p].imports {
			reach(q)
		}
	}
	for p, c := range core {
		if !strings.HasPrefix(p, coreTesting) {
			for _, q := range c.testImports {
				reach(q)
			}
		}
	}
	var names []string
	for p := range core {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		switch {
		case core[p].testsOnly:
			// a test, not a package (see pkg.testsOnly)
		case strings.HasPrefix(p, coreTesting):
			if !used[p] {
				t.Errorf("%s is in core/testing but no test of core imports it: a helper only tooling uses goes in the dev module", p)
			}
		case !linked[p]:
			t.Errorf("%s is in core but no entrypoint links it: core holds the product and, under core/testing, the helpers of its own tests; tooling goes in the dev module", p)
		}
	}
}

// TestModulesTidy: core/go.mod requires exactly what core's packages and
// their tests import, so (with TestLayout) no requirement there is one
// only tooling uses: the tooling's own are in dev/go.mod, tidy too. A
// requirement a move left behind, or one missing, shows as the diff `go
// mod tidy` would apply in that folder.
func TestModulesTidy(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, mod := range []string{"core", "dev"} {
		cmd := exec.Command("go", "mod", "tidy", "-diff")
		cmd.Dir = filepath.Join(root, mod)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil || len(out) > 0 {
			t.Errorf("%s/go.mod is not tidy (go mod tidy -diff: %v)\n%s%s", mod, err, out, stderr.String())
		}
	}
}

// goList runs go list with args in dir and returns its output lines.
func goList(t *testing.T, dir string, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}
