package helm

// installServerSide is how an install applies a release's objects:
// server-side, as the helm 4 CLI and SDK install by default
// (Install.ServerSideApply; the release records applyMethod "ssa"), with
// the field manager of Env.FieldManager ("helm", as the helm 4 CLI sets
// it), operation Apply, strict field validation (an unknown field is an
// error: "field not declared in schema") and no forced conflicts. An
// upgrade keeps the method its release was installed with (helm 4's rule:
// Upgrade.ServerSideApply "auto"), so releases khook installed
// client-side before (applyMethod "csa" or none) are upgraded
// client-side, as the helm 4 CLI upgrades them; a rollback likewise.
//
// Helm's server-side create takes no process-wide lock (helm 4's lock is
// around its client-side create only; decision 105), so releases installed
// in parallel create their objects in parallel: khook's copy of the
// client-side create (create.go) is left for what still creates
// client-side through Create. Decision 221 has the figures.
const installServerSide = true
