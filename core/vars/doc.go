// Package vars resolves khook variables and substitutes them into a spec's
// text before YAML parsing.
//
// # Sources
//
// Resolve merges the variable sources, highest precedence first:
//
//  1. --set NAME=value (later flags win over earlier ones)
//  2. --var-file files, each a flat NAME: value map (later files win)
//  3. environment variables <SecretPrefix>NAME (default KHOOK_SECRET_)
//  4. environment variables <VarPrefix>NAME (default KHOOK_VAR_)
//  5. the ${NAME:-default} written in the spec
//
// Only environment variables carrying one of the two prefixes are consumed.
// Every value of a <SecretPrefix> environment variable is registered with the
// redactor, whether or not it wins or is referenced.
//
// # Grammar
//
// Substitute replaces, anywhere in the text:
//
//	${NAME}                    the value of NAME
//	${NAME:-default}           the value of NAME, or default when NAME is not set
//	${NAME|pipeline}           the value piped through sprig functions
//	${NAME:-default|pipeline}  the default applies first, then the pipeline
//
// NAME matches [A-Za-z_][A-Za-z0-9_]*. Spaces and tabs are allowed around
// NAME and around each '|': ${APP | lower | trunc 63}. The default is the
// literal text after ":-" up to the first '|' or '}' (so a default followed
// by a pipeline cannot contain '|', and no default can contain '}' or "${");
// whitespace before a '|' is not part of the default. The pipeline runs to
// the first '}', so it cannot contain '}'. A reference must fit on one line.
//
// Substitution is textual and happens everywhere in the text, YAML comments
// included: a reference in a comment to an unset variable is an error too.
//
// # Escaping
//
// "$${" produces a literal "${", for shell scripts in job args:
//
//	args: ["echo $${HOME}"]   # the job sees: echo ${HOME}
//
// Any other "${" that does not match the grammar (${FOO#bar}, ${}, an
// unterminated ${FOO) is reported as a problem. A "$" not followed by "{"
// ($NAME, $1, a lone $) is left alone, and so is "$$" not followed by "{".
//
// # Pipelines
//
// A pipeline is ordinary sprig in helm's ". | pipeline" form: the value, a
// string, is piped into the first function, so ${V|printf "%sm"} is
// printf "%sm" V, and "." inside the pipeline is the value as well. The
// functions are sprig's hermetic text function map minus everything
// nondeterministic or reaching outside the spec (time, randomness, key and
// certificate generators, the environment, the network, the host OS): the
// substituted spec must be the same for plan and apply. Using an excluded
// function is a problem naming it and why.
//
// # Values are data
//
// The substituted text is never rescanned: a value containing "${" or
// "{{ }}" lands in the output verbatim, and "{{ }}" written in the document
// itself passes through untouched (only the pipeline text inside ${...} is
// ever templated).
//
// # Secrets
//
// When a referenced variable is secret (its value came from a
// <SecretPrefix> environment variable), the text substituted for the
// reference, after its pipeline, is registered with the redactor, so
// ${TOKEN|b64enc} is masked like ${TOKEN}.
//
// A secret value shorter than MinSecretLen characters (white space around
// it not counted) cannot be masked without masking ordinary text
// everywhere: Resolve refuses it (ErrShortSecret), naming the environment
// variable but neither the value nor its length, and does not register it.
package vars
