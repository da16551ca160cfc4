package engine

// Setting is a setting of a command that the engine's messages name (a
// selection, a wait for the run lock). The engine never spells a caller's
// flag or attribute: each caller says how it spells a setting
// (Spelling), the CLI as its flag ("--replace"), the Terraform provider
// as its attribute, a library caller as it likes.
type Setting string

// The settings the engine's messages name.
const (
	// SettingSteps selects the steps a command runs (the CLI's --steps).
	SettingSteps Setting = "steps"
	// SettingNoNeeds runs the selected steps without the steps they need.
	SettingNoNeeds Setting = "no-needs"
	// SettingReplace re-runs steps whatever the record says.
	SettingReplace Setting = "replace"
	// SettingLockTimeout is how long a run waits for the run lock.
	SettingLockTimeout Setting = "lock-timeout"
	// SettingForceCRDs lets destroy delete a CRD whose kind has custom
	// resources the spec did not create.
	SettingForceCRDs Setting = "force-crds"
)

// Spelling spells a setting in a caller's words; nil spells it neutrally
// ("the replace setting").
type Spelling func(Setting) string

// Of is s's spelling of x.
func (s Spelling) Of(x Setting) string {
	if s == nil {
		return "the " + string(x) + " setting"
	}
	return s(x)
}

// forcedNote is added to the outcome of a step the replace setting
// re-ran.
func (s Spelling) forcedNote() string { return "forced by " + s.Of(SettingReplace) }
