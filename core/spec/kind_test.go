package spec

import (
	"go/build"
	"strings"
	"testing"
)

type testBlock struct {
	Name string `yaml:"name" khook:"required" doc:"a name"`
}

// TestNewStepKinds: a kind's name is a lowerCamel word that is no step
// field and no other kind's, and its block a pointer to a struct; every
// problem is reported. The set keeps the given order.
func TestNewStepKinds(t *testing.T) {
	k, err := NewStepKinds(StepKind{Name: "one", Block: new(testBlock)}, StepKind{Name: "twoWords", Block: new(testBlock)})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(k.Names(), ","); got != "one,twoWords" {
		t.Errorf("names %s", got)
	}
	if bt, ok := k.BlockType("twoWords"); !ok || bt.Name() != "testBlock" {
		t.Errorf("block type %v %v", bt, ok)
	}
	if _, ok := k.Lookup("three"); ok {
		t.Error("lookup of an unknown kind")
	}
	_, err = NewStepKinds(
		StepKind{Name: "", Block: new(testBlock)},
		StepKind{Name: "Upper", Block: new(testBlock)},
		StepKind{Name: "needs", Block: new(testBlock)},
		StepKind{Name: "one", Block: testBlock{}},
		StepKind{Name: "two", Block: nil},
		StepKind{Name: "ok", Block: new(testBlock)},
		StepKind{Name: "ok", Block: new(testBlock)},
	)
	for _, want := range []string{
		`step kind "": the name must be a lowerCamel word`,
		`step kind "Upper": the name must be a lowerCamel word`,
		`step kind "needs": needs is a field of every step`,
		`step kind "one": its block is spec.testBlock, not a pointer to a struct`,
		`step kind "two": its block is <nil>, not a pointer to a struct`,
		`two step kinds are named "ok"`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in %v", want, err)
		}
	}
	var none *StepKinds
	if none.Names() != nil || none.List() != nil {
		t.Error("a nil set has kinds")
	}
}

// TestBlockOf: a step's block as its kind's type, nil for another type
// or no step.
func TestBlockOf(t *testing.T) {
	st := &Step{Name: "a"}
	st.SetAction("one", &testBlock{Name: "x"})
	if b := BlockOf[testBlock](st); b == nil || b.Name != "x" || st.Type() != "one" {
		t.Errorf("BlockOf %+v, type %q", b, st.Type())
	}
	if BlockOf[Metadata](st) != nil || BlockOf[testBlock](nil) != nil {
		t.Error("BlockOf of another type or of no step")
	}
	if st.Summary() != "" || st.OnlyWaits() {
		t.Error("a block without Summary or OnlyWaits")
	}
}

// TestNoPackageKnowsAKind: the packages that read a spec ask the kinds
// they are given; none imports a kind's package (decision 230).
func TestNoPackageKnowsAKind(t *testing.T) {
	for _, dir := range []string{".", "../load", "../schema", "../state", "../plan", "../step"} {
		pkg, err := build.ImportDir(dir, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range pkg.Imports {
			if strings.HasPrefix(imp, "khook.io/core/steps/") {
				t.Errorf("core/%s imports %s", strings.TrimPrefix(dir, "../"), imp)
			}
		}
	}
}
