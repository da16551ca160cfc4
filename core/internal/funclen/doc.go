// Package funclen holds the test that keeps the functions of the engine's
// working rooms short: no function of core/run, core/steps, core/cli,
// core/objects, core/lock, core/diagnose or core/waiter over MaxLines
// lines, counted from its func keyword to its closing brace.
package funclen

// MaxLines is the most lines a function of those packages may span.
const MaxLines = 80
