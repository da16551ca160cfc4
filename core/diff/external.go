package diff

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ExternalEnv names the external diff program, as for kubectl diff.
const ExternalEnv = "KUBECTL_EXTERNAL_DIFF"

// Trees are the two folders an external diff program compares, as
// kubectl diff writes them: LIVE-* and MERGED-* in the temporary
// directory, one YAML file per object in each (only the masked YAML of
// Prepare is ever written), an object absent on one side having no file
// there.
type Trees struct {
	Live, Merged string
	names        map[string]int
}

// NewTrees creates the two folders (mode 0700).
func NewTrees() (*Trees, error) {
	live, err := os.MkdirTemp("", "LIVE-")
	if err != nil {
		return nil, fmt.Errorf("diff folder: %w", err)
	}
	merged, err := os.MkdirTemp("", "MERGED-")
	if err != nil {
		_ = os.RemoveAll(live)
		return nil, fmt.Errorf("diff folder: %w", err)
	}
	return &Trees{Live: live, Merged: merged, names: map[string]int{}}, nil
}

// Add writes an object's two versions under name (see FileName); a name
// given twice gets a numbered suffix.
func (t *Trees) Add(name string, p Pair) error {
	t.names[name]++
	if n := t.names[name]; n > 1 {
		name = fmt.Sprintf("%s.%d", name, n)
	}
	for _, f := range []struct{ dir, text string }{{t.Live, p.Live}, {t.Merged, p.Merged}} {
		if f.text == "" {
			continue
		}
		if err := os.WriteFile(filepath.Join(f.dir, name), []byte(f.text), 0o600); err != nil {
			return fmt.Errorf("diff file: %w", err)
		}
	}
	return nil
}

// Remove deletes both folders.
func (t *Trees) Remove() error {
	return errors.Join(os.RemoveAll(t.Live), os.RemoveAll(t.Merged))
}

// FileName names an object's file: the step's name, then kubectl diff's
// group.version.kind.namespace.name (no group for the core group, an empty
// namespace for cluster-scoped kinds). obj is the merged version, or the
// live one when there is none.
func FileName(step string, obj *unstructured.Unstructured) string {
	gvk := obj.GroupVersionKind()
	name := obj.GetName()
	if name == "" {
		name = obj.GetGenerateName()
	}
	s := fmt.Sprintf("%s.%s.%s.%s", gvk.Version, gvk.Kind, obj.GetNamespace(), name)
	if gvk.Group != "" {
		s = gvk.Group + "." + s
	}
	return strings.ReplaceAll(step+"."+s, string(filepath.Separator), "_")
}

// Program is an external diff program.
type Program struct {
	Path string
	Args []string
}

// programArg is what kubectl keeps of the words after the program's name.
var programArg = regexp.MustCompile(`^[a-zA-Z0-9-=]+$`)

// ParseProgram reads KUBECTL_EXTERNAL_DIFF the way kubectl diff does: the
// value is split on spaces; the first word is the program, and each
// further word is kept only when it consists of letters, digits, '-' and
// '='. The zero Program (from "") means the built-in diff.
func ParseProgram(env string) Program {
	words := strings.Split(env, " ")
	if env == "" || words[0] == "" {
		return Program{}
	}
	p := Program{Path: words[0]}
	for _, w := range words[1:] {
		if programArg.MatchString(w) {
			p.Args = append(p.Args, w)
		}
	}
	return p
}

// Run runs the program as kubectl diff does, with the LIVE and MERGED
// folders first and the kept words after them (kubectl's order), its
// standard output and error going to stdout and stderr, in env. Like
// kubectl, it reads the exit status as diff(1)'s: 0 no differences, 1
// differences; any other status, or a program that cannot be run, is an
// error.
func (p Program) Run(ctx context.Context, t *Trees, stdout, stderr io.Writer, env []string) (differences bool, err error) {
	cmd := exec.CommandContext(ctx, p.Path, append([]string{t.Live, t.Merged}, p.Args...)...)
	cmd.Stdout, cmd.Stderr, cmd.Env = stdout, stderr, env
	err = cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		return false, nil
	case errors.As(err, &exitErr) && exitErr.ExitCode() == 1:
		return true, nil
	case errors.As(err, &exitErr) && exitErr.ExitCode() > 1:
		return false, fmt.Errorf("%s %q exited with status %d", ExternalEnv, p.Path, exitErr.ExitCode())
	}
	return false, fmt.Errorf("%s: run %q: %w", ExternalEnv, p.Path, err)
}
