//go:build tools

// Package tools pins h2spec, built by conformance/h2spec.sh from this module so that the
// versions in go.mod and go.sum (those h2spec 2.2.1 was released with) are the ones used:
// h2spec's own module has no go.mod at that tag, and its dependencies would float.
package tools

import _ "github.com/summerwind/h2spec/cmd/h2spec"
