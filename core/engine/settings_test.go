package engine

import (
	"strings"
	"testing"
)

// TestSettingsSpelled: the engine's messages name a setting as its caller
// spells it, and name no flag of the CLI's: neutrally without a
// spelling (a library caller, the provider), as the CLI's flag with the
// CLI's.
func TestSettingsSpelled(t *testing.T) {
	doc := loadDoc(t, "../cli/testdata/day2-spec.yaml")
	flag := func(s Setting) string { return "--" + string(s) }
	for _, tc := range []struct {
		name  string
		spell Spelling
		want  []string
	}{
		{"neutral", nil, []string{
			"the replace setting config: not selected by the steps setting argocd (the steps it names and the steps they need), so it would not run: name it in the steps setting too, or leave it out of the replace setting; nothing was run",
			"forced by the replace setting",
			"the no-needs setting: restart-web needs config, which is not selected (without a state record, nothing shows a need done): select it too, or leave out the no-needs setting; nothing was run",
			"the no-needs setting: needs config, neither selected nor done",
		}},
		{"flags", flag, []string{
			"--replace config: not selected by --steps argocd (the steps it names and the steps they need), so it would not run: name it in --steps too, or leave it out of --replace; nothing was run",
			"forced by --replace",
			"--no-needs: restart-web needs config, which is not selected (without a state record, nothing shows a need done): select it too, or leave out --no-needs; nothing was run",
			"--no-needs: needs config, neither selected nor done",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			_, err := Resolve(doc, CommandPlan, SelectOptions{Steps: []string{"argocd"}, Replace: []string{"config"}, Spelling: tc.spell})
			got = append(got, errText(err))
			sel, err := Resolve(doc, CommandPlan, SelectOptions{Replace: []string{"config"}, Spelling: tc.spell})
			if err != nil {
				t.Fatal(err)
			}
			i, _ := doc.Graph.Index("config")
			got = append(got, Dispose(doc, CommandPlan, sel, Facts{})[i].Reason(doc, i))
			if sel, err = Resolve(doc, CommandPlan, SelectOptions{Steps: []string{"restart-web"}, NoNeeds: true, Spelling: tc.spell}); err != nil {
				t.Fatal(err)
			}
			disp := Dispose(doc, CommandPlan, sel, Facts{})
			j, _ := doc.Graph.Index("restart-web")
			got = append(got, errText(CheckBlocked(doc, disp)), disp[j].Reason(doc, j))
			for k, w := range tc.want {
				if got[k] != w {
					t.Errorf("message %d:\n got %q\nwant %q", k, got[k], w)
				}
				if tc.spell == nil && strings.Contains(got[k], "--") {
					t.Errorf("message %d names a flag: %q", k, got[k])
				}
			}
		})
	}
}

func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
