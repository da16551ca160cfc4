package step

import "khook.io/core/plan"

// Action is what a live plan predicts a step would do, as the kind that
// predicts it declares it: its word, and what the engine, the renderers
// and the Terraform provider read from it instead of the word. A kind
// with a new word declares a new Action, and the plan counts, renders and
// the provider plans it without knowing the word (decision 285).
type Action struct {
	// Word names the action where it is shown: the plan's ACTION column
	// and its counts, -o json's action, the provider's steps rows.
	Word string
	// Changes: doing it changes the cluster, as apply's Outcome.Changed
	// says: a step with triggeredBy whose trigger predicts it is planned
	// to run, and a diff without objects counts it as a change.
	Changes bool
	// Drift: the prediction finds the cluster not as the spec wants it,
	// and doing it brings the cluster there (so the next plan predicts
	// something else): with it, the Terraform provider plans an update of
	// an unchanged spec. What a step does on every run (a rollout's
	// restart, a wait) is not drift, or every plan would show an update.
	Drift bool
	// Unknown: the plan cannot tell what the step would do; the
	// prediction's Reason says why.
	Unknown bool
}

// String is the action's word.
func (a Action) String() string { return a.Word }

// The actions the engine and more than one kind predict; a kind declares
// its own beside them (helm's install, rollout's restart).
var (
	// ActionRun: the step runs (the offline plan's word for every step it
	// includes; a Job the plan expects to run).
	ActionRun = Action{Word: plan.ActionRun, Changes: true, Drift: true}
	// ActionSkip: the step does nothing (its fate, or what it finds).
	ActionSkip = Action{Word: plan.ActionSkip}
	// ActionUnknown: the plan cannot tell; also the prediction of a step
	// whose Plan fails.
	ActionUnknown = Action{Word: plan.ActionUnknown, Unknown: true}
	// ActionCreate: the objects do not exist yet.
	ActionCreate = Action{Word: plan.ActionCreate, Changes: true, Drift: true}
	// ActionConfigure: a dry run of the apply changes fields.
	ActionConfigure = Action{Word: plan.ActionConfigure, Changes: true, Drift: true}
	// ActionUnchanged: the objects exist and a dry run changes none of
	// them (kubectl apply's word).
	ActionUnchanged = Action{Word: plan.ActionUnchanged}
	// ActionDelete: objects (or a release) the step deletes exist.
	ActionDelete = Action{Word: plan.ActionDelete, Changes: true, Drift: true}
	// ActionNoOp: the step would find nothing to do.
	ActionNoOp = Action{Word: plan.ActionNoOp}
	// ActionPatch: a dry run of the patch changes fields.
	ActionPatch = Action{Word: plan.ActionPatch, Changes: true, Drift: true}
	// ActionWait: the step would wait; waiting changes nothing.
	ActionWait = Action{Word: plan.ActionWait}
)

// DestroyAction is what destroy does with one object (or release) of a
// step, as the kind that plans it declares it: its word, and how the
// destroy plan's headline counts it.
type DestroyAction struct {
	// Word names it in the destroy plan's line of the object.
	Word string
	// Tally is how the headline counts it ("to delete": "2 to delete");
	// empty: not counted (an object already gone, one destroy keeps).
	Tally string
	// Rank orders the headline's counts, lowest first (then by Tally).
	Rank int
	// Refuses: destroy refuses the object (a CRD whose custom resources
	// it did not create): the plan lists it, and destroy stops before it
	// asks.
	Refuses bool
}

// String is the action's word.
func (a DestroyAction) String() string { return a.Word }

// The destroy actions more than one kind plans.
var (
	// DestroyDelete: the object is deleted.
	DestroyDelete = DestroyAction{Word: "delete", Tally: "to delete", Rank: 10}
	// DestroyRevert: khook's fields are given back on an object the
	// spec did not create.
	DestroyRevert = DestroyAction{Word: "revert", Tally: "to revert", Rank: 30}
	// DestroyRejected: the server rejects giving khook's fields back.
	DestroyRejected = DestroyAction{Word: "rejected", Tally: "rejected by the server", Rank: 40}
	// DestroyLeave: destroy leaves the object as it is.
	DestroyLeave = DestroyAction{Word: "leave", Tally: "left alone", Rank: 50}
	// DestroyKeep: destroy never deletes it (a namespace).
	DestroyKeep = DestroyAction{Word: "keep"}
	// DestroyGone: already gone.
	DestroyGone = DestroyAction{Word: "gone"}
	// DestroyRefuse: destroy refuses it (Refuses).
	DestroyRefuse = DestroyAction{Word: "refuse", Tally: "refused", Rank: 60, Refuses: true}
	// DestroyUnknown: what destroy would do cannot be read.
	DestroyUnknown = DestroyAction{Word: "unknown", Tally: "unknown", Rank: 70}
)
