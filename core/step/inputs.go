package step

import (
	"context"

	"khook.io/core/spec"
)

// InputDeclarer is implemented by executors whose steps read more than
// their spec: local files and folders, kustomizations, charts, remote
// content. The run-state record hashes what they declare (package state),
// so a step re-runs when one of its inputs changes; the engine never
// switches over step types to find them.
type InputDeclarer interface {
	// Inputs lists what st reads, in the order it reads them. Local paths
	// are as the spec writes them, relative to baseDir. Declaring reads
	// nothing: the functions an input carries do. When part of st's inputs
	// cannot be declared (a malformed reference), Inputs returns those it
	// could and an error, reported after they are read.
	Inputs(st *spec.Step, baseDir string) ([]Input, error)
}

// Input is one thing a step reads. Exactly one field is set.
type Input struct {
	// Path is a local file, or a folder whose every regular file (outside
	// .git folders) is read, as the spec writes it.
	Path string
	// Kustomization is a kustomization the step builds.
	Kustomization *KustomizationInput
	// Files is a set of files a loader picks (a chart's, as helm loads
	// it), with what the loader found it depends on remotely.
	Files *FilesInput
	// Remote is content the step fetches that the spec identifies by
	// reference only, described for people ("manifests[1] (url ...)",
	// credentials stripped): a change behind it changes no hash.
	Remote string
}

// FSRead is one file system call a build made and what it returned, by
// path relative to the kustomization (manifest.FSRead).
type FSRead struct {
	Op, Path, Result string
}

// KustomizationInput is a kustomization and how to learn what its build
// reads.
type KustomizationInput struct {
	// Path is the kustomization's folder as the spec writes it.
	Path string
	// Build builds the kustomization and returns every file system call
	// the build made, with its result.
	Build func(ctx context.Context) ([]FSRead, error)
	// Replay makes the calls (Op and Path) again, without a build, and
	// returns them with what they return now.
	Replay func(calls []FSRead) ([]FSRead, error)
}

// FilesInput is a set of files a loader picks.
type FilesInput struct {
	// Kind and Source name the set in the hash ("chart", the chart as the
	// spec writes it).
	Kind, Source string
	// Read loads the set: each file (by path relative to the set's folder,
	// in load order) with the hex sha256 of its content, and the remote
	// content the set depends on by reference only.
	Read func() (files []FileDigest, remote []string, err error)
}

// FileDigest is a file and the hex sha256 of its content.
type FileDigest struct {
	Path, Digest string
}
