//go:build race

package engine

// raceEnabled: this test binary was built with -race (TestLayoutTypes
// asks go list for the export data of the same build).
const raceEnabled = true
